// Channel teardown: a killed peer process, a corrupt frame length, and a late reply
// after cancel, each against a real socket. Pending requests must fail at once,
// on-close must run exactly once, and a late frame must never reach another request.

import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { fileURLToPath } from "node:url";
import {
  ChannelClosedError,
  FrameTooLargeError,
  RequestAbortedError,
  connectChannel,
  listenChannels,
} from "../../transport/index.ts";
import { encodeHead, FrameDecoder, Flag, HEAD_BYTES, Kind } from "../../transport/frame-codec.ts";
import { deferred, tempDir } from "./pair.ts";
import { TS_LOADER } from "../helpers/ts-loader.ts";

const dir = tempDir("tito-down-");
const fixture = fileURLToPath(new URL("../fixtures/transport-peer.ts", import.meta.url));
let child: ChildProcess | undefined;

test.after(() => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  dir.remove();
});

const closedError = (e: unknown) => assert.instance(e, ChannelClosedError);

test("peer process killed: every pending request and body fails at once, on-close runs once", async () => {
  const path = dir.path("peer.sock");
  child = spawn(process.execPath, [...TS_LOADER, fixture, path], { stdio: ["pipe", "pipe", "inherit"] });
  const [line] = (await once(child.stdout!, "data")) as [Buffer];
  assert.is(line.toString().trim(), "ready");
  const ch = await connectChannel(path);
  const closes: Array<Error | undefined> = [];
  ch.onClose((err) => closes.push(err));
  const hangs = [1, 2, 3].map(() => ch.request({ op: "hang" }));
  const settled = hangs.map((p) =>
    p.then(
      () => "resolved",
      (e: unknown) => e,
    ),
  );
  const stream = await ch.request({ op: "stream" });
  const it = stream.body[Symbol.asyncIterator]();
  await it.next(); // the reply body is flowing
  const pong = await ch.request({ op: "ping" }); // served after the hangs: they are all pending in the child
  assert.is(pong.meta.pid, child.pid);
  assert.is(ch.stats().pending, 4);

  const exited = once(child, "exit");
  child.kill("SIGKILL");
  for (const r of await Promise.all(settled)) closedError(r);
  let bodyError: unknown;
  try {
    for (let r = await it.next(); !r.done; r = await it.next());
  } catch (e) {
    bodyError = e;
  }
  closedError(bodyError);
  await exited;
  assert.ok(ch.closed);
  assert.is(ch.stats().pending, 0);
  await ch.request({ op: "ping" }).then(() => assert.unreachable("a closed channel sent a request"), closedError);
  ch.close(); // explicit close after the peer's death changes nothing
  const late = deferred<Error | undefined>();
  ch.onClose((err) => late.resolve(err)); // a callback added after close still runs, once
  await late.promise;
  assert.is(closes.length, 1);
});

test("a corrupt frame length tears the channel down and fails pending requests", async () => {
  // A raw peer answers the channel's request with a length no frame may have.
  const path = dir.path("corrupt.sock");
  const server: Server = createServer((sock) => {
    sock.once("data", () => {
      const head = Buffer.alloc(HEAD_BYTES);
      head.writeUInt32LE(0xfffffff0, 0);
      sock.write(head);
    });
  });
  await new Promise<void>((r) => server.listen(path, r));
  try {
    const ch = await connectChannel(path, { maxFrameBytes: 1024 * 1024, chunkBytes: 64 * 1024 });
    const closed = deferred<Error | undefined>();
    ch.onClose((err) => closed.resolve(err));
    const pending = ch.request({ op: "x" }).then(
      () => new Error("resolved"),
      (e: unknown) => e as Error,
    );
    const err = await pending;
    closedError(err);
    assert.instance(err.cause, FrameTooLargeError);
    assert.instance(await closed.promise, FrameTooLargeError);
    assert.ok(ch.closed);
  } finally {
    await new Promise((r) => server.close(r));
  }

  // The same on the serving side: a listener's channel drops a peer that sends garbage.
  const path2 = dir.path("corrupt2.sock");
  const closed = deferred<Error | undefined>();
  const listener = await listenChannels(path2, (ch) => ch.onClose((err) => closed.resolve(err)));
  try {
    const raw: Socket = createConnection({ path: path2 });
    await once(raw, "connect");
    const head = Buffer.alloc(HEAD_BYTES);
    head.writeUInt32LE(0x7fffffff, 0);
    raw.write(head);
    assert.instance(await closed.promise, FrameTooLargeError);
    await once(raw, "close"); // the listener hung up on it
  } finally {
    await listener.close();
  }
});

test("a late reply after cancel is dropped, never handed to the next request", async () => {
  // A raw peer that ignores CANCEL and answers the cancelled request anyway.
  const path = dir.path("late.sock");
  const frames: Array<{ kind: number; id: number; meta: unknown }> = [];
  const arrived = new Map<string, ReturnType<typeof deferred<number>>>();
  const waitFor = (key: string) => {
    if (!arrived.has(key)) arrived.set(key, deferred<number>());
    return arrived.get(key)!.promise;
  };
  let peer!: Socket;
  const server: Server = createServer((sock) => {
    peer = sock;
    const decoder = new FrameDecoder(
      {
        frame: (kind, _flags, id, meta) => {
          frames.push({ kind, id, meta });
          const key =
            kind === Kind.REQUEST
              ? `request ${(meta as { n: number }).n}`
              : kind === Kind.CANCEL
                ? `cancel ${id}`
                : `kind ${kind}`;
          if (!arrived.has(key)) arrived.set(key, deferred<number>());
          arrived.get(key)!.resolve(id);
        },
        body: () => {},
        frameEnd: () => {},
      },
      1024 * 1024,
    );
    sock.on("data", (chunk) => decoder.push(chunk));
  });
  await new Promise<void>((r) => server.listen(path, r));
  const ch = await connectChannel(path);
  try {
    const reply = (id: number, meta: object) =>
      peer.write(encodeHead(Kind.REPLY, Flag.BODY_NONE, id, meta, 0, 1024 * 1024));
    const ac = new AbortController();
    const first = ch.request({ n: 1 }, undefined, { signal: ac.signal });
    const firstId = await waitFor("request 1");
    ac.abort();
    await first.then(
      () => assert.unreachable("cancelled request resolved"),
      (e) => assert.instance(e, RequestAbortedError),
    );
    assert.is(await waitFor(`cancel ${firstId}`), firstId);
    reply(firstId, { for: "first (late)" });
    const second = ch.request({ n: 2 });
    const secondId = await waitFor("request 2");
    assert.is.not(secondId, firstId, "request ids are never reused");
    reply(firstId, { for: "first (later still)" });
    reply(secondId, { for: "second" });
    assert.equal((await second).meta, { for: "second" });
    assert.is(ch.stats().pending, 0);
    assert.not.ok(ch.closed);
  } finally {
    ch.close();
    await new Promise((r) => server.close(r));
  }
});

test.run();
