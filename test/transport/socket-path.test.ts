// listenChannels / connectChannel own their socket file: 0600, a stale file is
// replaced, a live listener or a regular file is never removed, close deletes the file.

import { test } from "uvu";
import * as assert from "uvu/assert";
import { existsSync, statSync, writeFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { ChannelClosedError, SocketInUseError, connectChannel, listenChannels } from "../../transport/index.ts";
import { tempDir } from "./pair.ts";

const dir = tempDir("tito-sock-");
test.after(() => dir.remove());

test("listening makes an owner-only socket; close removes it and closes accepted channels", async () => {
  const path = dir.path("a.sock");
  const listener = await listenChannels(path, (ch) => ch.serve(async (req) => ({ meta: { echo: req.meta.x } })));
  assert.is(statSync(path).mode & 0o777, 0o600);
  const ch = await connectChannel(path);
  assert.equal((await ch.request({ x: 1 })).meta, { echo: 1 });
  const closed = new Promise((r) => ch.onClose(r));
  await listener.close();
  await closed;
  assert.not.ok(existsSync(path));
  await ch.request({ x: 2 }).then(
    () => assert.unreachable(),
    (e) => assert.instance(e, ChannelClosedError),
  );
  await listener.close(); // idempotent
});

test("a stale socket file is replaced; a live one or a regular file is refused", async () => {
  const path = dir.path("b.sock");
  // A process that listens and is killed leaves its socket file behind, like a crashed worker.
  spawnSync(process.execPath, [
    "-e",
    `require("net").createServer().listen(${JSON.stringify(path)}, () => process.kill(process.pid, "SIGKILL"))`,
  ]);
  assert.ok(statSync(path).isSocket(), "the fixture left a stale socket file");
  const listener = await listenChannels(path, () => {});
  try {
    await listenChannels(path, () => {}).then(
      () => assert.unreachable("took over a live socket"),
      (e) => assert.instance(e, SocketInUseError),
    );
    assert.ok(existsSync(path), "the live socket file was removed");
  } finally {
    await listener.close();
  }
  const file = dir.path("plain");
  writeFileSync(file, "keep me");
  await listenChannels(file, () => {}).then(
    () => assert.unreachable("removed a regular file"),
    (e) => assert.instance(e, SocketInUseError),
  );
  assert.ok(existsSync(file));
});

test.run();
