// The sweep of socket directories left by killed hosts (server/host/socket-dir.ts), in a
// private temp root: only `tito-sock-<dead pid>-XXXXXX` directories of this user that hold
// nothing but dead sockets go; a live owner, a socket that still answers, any other file,
// a symlink, a name without a pid and a data directory all stay. (The end-to-end case —
// a directory left by a kill -9'd CLI, swept by the next one — is in cli.test.ts.)
import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeSocketDir, sweepStaleSocketDirs } from "../../server/host/socket-dir.ts";

const root = mkdtempSync(join(tmpdir(), "tito-sweep-test-"));
const servers: Server[] = [];
test.after(() => {
  for (const s of servers) s.close();
  rmSync(root, { recursive: true, force: true });
});

/** A pid that no longer names a process: a child that exited and was reaped. */
const deadPid = () => spawnSync(process.execPath, ["-e", ""]).pid!;

/** A socket file whose listener was killed with SIGKILL (it never got to unlink it). */
async function deadSocket(path: string): Promise<void> {
  const child = spawn(
    process.execPath,
    ["-e", `require("net").createServer().listen(${JSON.stringify(path)}, () => console.log("up"))`],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  await new Promise<void>((resolve) => child.stdout!.once("data", () => resolve()));
  child.kill("SIGKILL");
  await new Promise((resolve) => child.once("exit", resolve));
  assert.ok(existsSync(path), "the killed listener left its socket file");
}

async function liveSocket(path: string): Promise<void> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(path, resolve));
}

test("makeSocketDir names this process as the owner", () => {
  const dir = makeSocketDir(root);
  assert.match(dir, new RegExp(`/tito-sock-${process.pid}-[A-Za-z0-9]{6}$`));
  rmSync(dir, { recursive: true });
});

test("only directories of dead owners holding nothing but dead sockets are removed", async () => {
  const dead = deadPid();
  const dir = (name: string) => {
    mkdirSync(join(root, name));
    return join(root, name);
  };
  const staleEmpty = dir(`tito-sock-${dead}-aaaaaa`);
  const staleSockets = dir(`tito-sock-${dead}-bbbbbb`);
  await deadSocket(join(staleSockets, "shard-0.1.sock"));
  await deadSocket(join(staleSockets, "shard-1.3.sock"));
  const liveOwner = dir(`tito-sock-${process.pid}-cccccc`);
  const answering = dir(`tito-sock-${dead}-dddddd`); // e.g. a server in another pid namespace
  await deadSocket(join(answering, "shard-0.1.sock"));
  await liveSocket(join(answering, "shard-1.1.sock"));
  const withFile = dir(`tito-sock-${dead}-eeeeee`);
  writeFileSync(join(withFile, "notes.txt"), "not a socket");
  const noPid = dir("tito-sock-ffffff");
  const data = dir(`tito-data-${dead}-gggggg`);
  writeFileSync(join(data, "00000001.tj"), "journal");
  const target = dir("elsewhere");
  symlinkSync(target, join(root, `tito-sock-${dead}-hhhhhh`));
  const notOurs = dir(`tito-sock-${dead}-iiiiii-extra`);

  const removed = await sweepStaleSocketDirs(root);
  assert.equal(removed.sort(), [staleEmpty, staleSockets].sort());
  assert.equal(
    readdirSync(root).sort(),
    [
      "elsewhere",
      `tito-data-${dead}-gggggg`,
      `tito-sock-${dead}-dddddd`,
      `tito-sock-${dead}-eeeeee`,
      `tito-sock-${dead}-hhhhhh`,
      `tito-sock-${dead}-iiiiii-extra`,
      `tito-sock-${process.pid}-cccccc`,
      "tito-sock-ffffff",
    ].sort(),
  );
  assert.equal(readdirSync(answering).sort(), ["shard-0.1.sock", "shard-1.1.sock"], "nothing taken out of a kept one");
  assert.equal(readdirSync(withFile), ["notes.txt"]);
  assert.equal(readdirSync(data), ["00000001.tj"]);
  for (const kept of [liveOwner, noPid, notOurs, target]) assert.ok(existsSync(kept));
  assert.equal(await sweepStaleSocketDirs(root), [], "a second sweep finds nothing");
});

test("a missing root is no error", async () => {
  assert.equal(await sweepStaleSocketDirs(join(root, "no-such-dir")), []);
});

test.run();
