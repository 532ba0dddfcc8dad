// Flow control over a real Unix socket: a 256 MiB reply does not hold small replies
// behind it, a consumer that stops reading stalls only its own stream (window credit),
// and a peer that stops reading the socket stalls the writer at about one chunk.

import { setTimeout as sleep } from "node:timers/promises";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { Channel } from "../../transport/index.ts";
import { channelPair, tempDir, until, type Pair } from "./pair.ts";

const MiB = 2 ** 20;
const dir = tempDir("tito-flow-");
let pair: Pair;
let produced = 0; // bytes the server's body generators have yielded so far

// Lazily yields `total` bytes by reusing one chunk-sized buffer: 256 MiB costs 1 MiB.
async function* lazyBody(total: number, piece = MiB) {
  const buf = Buffer.alloc(piece, 0x5a);
  for (let sent = 0; sent < total; sent += piece) {
    const n = Math.min(piece, total - sent);
    produced += n;
    yield n === piece ? buf : buf.subarray(0, n);
  }
}

// A body that trickles in (an event stream): each piece waits until the reader has the one
// before, and for a timer (a producer slower than the event loop, as an engine is).
let readerHas = 0;
let wakeWriter: () => void = () => {};
async function* trickle(pieces: number) {
  for (let i = 0; i < pieces; i++) {
    while (readerHas < i) await new Promise<void>((r) => (wakeWriter = r));
    await sleep(1);
    yield Buffer.from(`data: event ${i}\n\n`);
  }
}

test.before(async () => {
  pair = await channelPair(dir.path("flow.sock"), { windowBytes: 4 * MiB }); // 1 MiB chunks (default)
  pair.server.serve(async (req) => {
    if (req.meta.op === "big") return { meta: { big: true }, body: lazyBody(Number(req.meta.bytes)) };
    if (req.meta.op === "trickle") return { meta: {}, body: trickle(Number(req.meta.pieces)) };
    return { meta: { small: req.meta.i }, body: Buffer.from(`small ${req.meta.i}`) };
  });
});
test.after(async () => {
  await pair.close();
  dir.remove();
});

test("interleaving: 100 small requests sent after a 256 MiB reply started all finish before it", async () => {
  const events: string[] = [];
  const big = await pair.client.request({ op: "big", bytes: 256 * MiB });
  let received = 0;
  let maxInbound = 0;
  let smalls: Promise<void>[] | undefined;
  for await (const piece of big.body) {
    received += piece.length;
    maxInbound = Math.max(maxInbound, pair.client.stats().inboundBufferedBytes);
    // Once the big body is really flowing, send the small ones behind it.
    smalls ??= Array.from({ length: 100 }, (_, i) =>
      pair.client.request({ op: "small", i }).then(async (res) => {
        assert.is(res.meta.small, i);
        assert.is(Buffer.concat(await res.body.collect()).toString(), `small ${i}`);
        events.push(`small ${i}`);
      }),
    );
  }
  events.push("big end");
  await Promise.all(smalls!);
  assert.is(received, 256 * MiB);
  assert.is(events.length, 101);
  assert.is(
    events.indexOf("big end"),
    100,
    `the big reply ended before small ${events.length - 1 - events.indexOf("big end")} replies`,
  );
  // The receiver never held more than its window plus the chunks in flight.
  assert.ok(maxInbound <= 6 * MiB, `receiver buffered ${maxInbound} bytes`);
});

test("window credit: a consumer that stops reading stalls only its stream, and the writer stops producing", async () => {
  produced = 0;
  const res = await pair.client.request({ op: "big", bytes: 64 * MiB });
  const it = res.body[Symbol.asyncIterator]();
  let received = (await it.next()).value!.length; // read one piece, then pause
  await until(
    () => pair.server.stats().creditBlocked === 1 && !pair.server.stats().socketBlocked,
    "the server stream to run out of credit",
  );
  const server = pair.server.stats();
  // Window (4 MiB) + the first chunk sent before the first grant + one chunk prefetched.
  assert.ok(produced <= 6 * MiB, `the writer produced ${produced} bytes for a paused reader`);
  assert.ok(server.bufferedBytes <= 2 * MiB, `the writer buffered ${server.bufferedBytes} bytes`);
  assert.ok(pair.client.stats().inboundBufferedBytes <= 6 * MiB);
  // The channel is not stalled by the paused stream.
  const small = await pair.client.request({ op: "small", i: 7 });
  assert.is(small.meta.small, 7);
  for (let r = await it.next(); !r.done; r = await it.next()) received += r.value.length;
  assert.is(received, 64 * MiB);
  assert.is(produced, 64 * MiB);
});

test("a body that trickles in goes out piece by piece, never held for a chunk's worth or its end", async () => {
  readerHas = 0;
  const res = await pair.client.request({ op: "trickle", pieces: 20 });
  const guard = setTimeout(() => pair.client.close(new Error("a piece was held back")), 20_000).unref();
  let text = "";
  for await (const piece of res.body) {
    text += piece.toString();
    readerHas = text.split("\n\n").length - 1;
    wakeWriter();
  }
  clearTimeout(guard);
  assert.is(readerHas, 20);
});

test("socket backpressure: a peer that stops reading its socket stalls the writer at about one chunk", async () => {
  const path = dir.path("raw.sock");
  let serverCh: Channel | undefined;
  const server: Server = createServer((sock) => {
    serverCh = new Channel(sock, { initiator: false });
    serverCh.serve(async () => ({ meta: {}, body: lazyBody(64 * MiB) }));
  });
  await new Promise<void>((r) => server.listen(path, r));
  const sock: Socket = createConnection({ path });
  await new Promise((r) => sock.once("connect", r));
  // A huge window takes credit out of the picture: only the socket can push back.
  const client = new Channel(sock, { initiator: true, windowBytes: 1024 * MiB });
  try {
    produced = 0;
    const res = await client.request({});
    sock.pause();
    let last = -1;
    let stableTurns = 0;
    await until(() => {
      const s = serverCh!.stats();
      stableTurns = s.socketBlocked && s.bufferedBytes === last ? stableTurns + 1 : 0;
      last = s.bufferedBytes;
      return stableTurns >= 500;
    }, "the server writer to stall on a paused socket");
    assert.ok(produced < 16 * MiB, `the writer produced ${produced} of 64 MiB for a paused peer`);
    assert.ok(
      serverCh!.stats().bufferedBytes <= 2 * MiB + 64 * 1024,
      `the writer buffered ${serverCh!.stats().bufferedBytes} bytes`,
    );
    sock.resume();
    let received = 0;
    for await (const b of res.body) received += b.length;
    assert.is(received, 64 * MiB);
  } finally {
    client.close();
    serverCh?.close();
    await new Promise((r) => server.close(r));
  }
});

test.run();
