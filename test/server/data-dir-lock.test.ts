// One server per --data-dir: the lock file names its holder; a live holder refuses a
// second server, a holder whose pid is gone (killed host) or an unreadable lock is taken
// over, and release removes only the holder's own lock.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lockDataDir, LOCK_FILE } from "../../server/host/data-dir-lock.ts";
import { DataDirInUseError } from "../../server/host/errors.ts";

const root = mkdtempSync(join(tmpdir(), "tito-lock-test-"));
test.after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => mkdtempSync(join(root, `d${n++}-`));
const holderOf = (dir: string) => JSON.parse(readFileSync(join(dir, LOCK_FILE), "utf8"));

test("a live holder refuses a second lock, naming its pid; after release the directory can be locked again", () => {
  const dir = freshDir();
  const first = lockDataDir(dir, "a");
  assert.equal(holderOf(dir), { pid: process.pid, instance: "a" });
  try {
    lockDataDir(dir, "b");
    assert.unreachable("a second lock on a held directory");
  } catch (err) {
    assert.instance(err, DataDirInUseError);
    assert.is((err as DataDirInUseError).code, "TITO_ERR_DATA_DIR_IN_USE");
    assert.is((err as DataDirInUseError).holderPid, process.pid);
    assert.match((err as Error).message, `pid ${process.pid}`);
    assert.match((err as Error).message, join(dir, LOCK_FILE));
  }
  assert.equal(holderOf(dir), { pid: process.pid, instance: "a" }, "the refused attempt left the lock alone");
  first.release();
  first.release();
  assert.not.ok(existsSync(join(dir, LOCK_FILE)));
  lockDataDir(dir, "c").release();
});

test("a lock whose pid no longer exists, or that cannot be read, is taken over", () => {
  const gone = spawnSync(process.execPath, ["-e", ""]).pid!; // exited and reaped: its pid is free
  for (const content of [JSON.stringify({ pid: gone, instance: "killed" }), "", "{not json"]) {
    const dir = freshDir();
    writeFileSync(join(dir, LOCK_FILE), content);
    const lock = lockDataDir(dir, "new");
    assert.equal(holderOf(dir), { pid: process.pid, instance: "new" }, `taken over from ${JSON.stringify(content)}`);
    lock.release();
  }
});

test("release removes only its own lock", () => {
  const dir = freshDir();
  const lock = lockDataDir(dir, "mine");
  writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: process.pid, instance: "someone else" }));
  lock.release();
  assert.equal(holderOf(dir), { pid: process.pid, instance: "someone else" });
});

test.run();
