// Channel behaviour over a real Unix socket: round trips, many requests in flight,
// coded errors across the channel, cancellation, send-time size refusal, body errors.

import { test } from "uvu";
import * as assert from "uvu/assert";
import { createHash } from "node:crypto";
import {
  FrameTooLargeError,
  RemoteError,
  RequestAbortedError,
  WRITTEN,
  type Handler,
  type Releasable,
  type Reply,
} from "../../transport/index.ts";
import { channelPair, deferred, tempDir, totalBytes, type Pair } from "./pair.ts";

class QuotaError extends Error {
  readonly code = "TEST_ERR_QUOTA";
  readonly status = 429;
  constructor(
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

const dir = tempDir("tito-ch-");
let pair: Pair;
let handler: Handler = async () => ({ meta: {} });

test.before(async () => {
  // Small chunks and frames so multi-chunk paths run on small data.
  pair = await channelPair(dir.path("ch.sock"), {
    chunkBytes: 16 * 1024,
    maxFrameBytes: 64 * 1024,
    errorCodes: { TEST_ERR_QUOTA: QuotaError },
  });
  pair.server.serve((req) => handler(req));
});
test.after(async () => {
  await pair.close();
  dir.remove();
});

const sha = (parts: Buffer[]) => {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return h.digest("hex");
};

test("round trip: meta and a one-frame body both ways", async () => {
  handler = async (req) => {
    const parts = await req.body.collect();
    return {
      meta: { got: req.meta, streaming: req.body.streaming },
      body: Buffer.concat([Buffer.from("re:"), ...parts]),
    };
  };
  const res = await pair.client.request({ op: "echo", n: 1, nested: { a: [1, "x"] } }, Buffer.from("hello"));
  assert.equal(res.meta, { got: { op: "echo", n: 1, nested: { a: [1, "x"] } }, streaming: false });
  assert.is(res.body.streaming, false);
  assert.is(Buffer.concat(await res.body.collect()).toString(), "re:hello");
  const empty = await pair.client.request({ op: "echo" });
  assert.is(Buffer.concat(await empty.body.collect()).toString(), "re:");
});

test("round trip: a body larger than a chunk streams both ways, bytes intact", async () => {
  const big = Buffer.alloc(1_000_003);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7919) % 251;
  handler = async (req) => {
    const parts = await req.body.collect();
    return { meta: { streaming: req.body.streaming, bytes: totalBytes(parts), sha: sha(parts) }, body: parts };
  };
  const res = await pair.client.request({ op: "echo" }, big);
  assert.equal(res.meta, { streaming: true, bytes: big.length, sha: sha([big]) });
  assert.is(res.body.streaming, true);
  const back = await res.body.collect();
  assert.is(totalBytes(back), big.length);
  assert.is(sha(back), sha([big]));
  assert.equal(pair.client.stats().pending, 0);
});

test("1000 concurrent requests answered in reverse order match by id", async () => {
  const N = 1000;
  const waiting: Array<() => void> = [];
  handler = (req) =>
    new Promise<Reply>((resolve) => {
      waiting.push(() => resolve({ meta: { i: req.meta.i }, body: Buffer.from(`reply ${req.meta.i}`) }));
      if (waiting.length === N) void answerInReverse();
    });
  // One answer per event-loop turn, so each reply frame is written before the next
  // handler completes (resolving them all in one go would let promise adoption reorder them).
  const answerInReverse = async () => {
    for (let k = N - 1; k >= 0; k--) {
      waiting[k]!();
      await new Promise((r) => setImmediate(r));
    }
  };
  const order: number[] = [];
  const all = Array.from({ length: N }, (_, i) =>
    pair.client.request({ i }, Buffer.from(`req ${i}`)).then(async (res) => {
      order.push(i);
      assert.is(res.meta.i, i);
      assert.is(Buffer.concat(await res.body.collect()).toString(), `reply ${i}`);
    }),
  );
  await Promise.all(all);
  const reversed = order.every((v, k) => v === N - 1 - k);
  assert.ok(order.length === N && reversed, `completion order not reversed: ${order.slice(0, 8).join(",")}…`);
  assert.is(pair.client.stats().pending, 0);
  assert.is(pair.server.stats().serving, 0);
});

test("handler errors arrive as the same coded error; the channel stays usable", async () => {
  handler = async (req) => {
    if (req.meta.kind === "registered") throw new QuotaError("too many", { limit: 3 });
    if (req.meta.kind === "unknown")
      throw Object.assign(new Error("teapot"), { code: "TEST_ERR_UNKNOWN", status: 418 });
    if (req.meta.kind === "plain") throw new Error("boom");
    if (req.meta.kind === "transport") throw new FrameTooLargeError("made up");
    return { meta: { fine: true } };
  };
  type Coded = Error & { code: string; status: number; data?: unknown };
  const err = async (kind: string): Promise<Coded> => {
    try {
      await pair.client.request({ kind });
    } catch (e) {
      return e as Coded;
    }
    throw new Error(`request ${kind} should have failed`);
  };
  const q = await err("registered");
  assert.instance(q, QuotaError);
  assert.is(q.code, "TEST_ERR_QUOTA");
  assert.is(q.status, 429);
  assert.is(q.message, "too many");
  assert.equal(q.data, { limit: 3 });
  const u = await err("unknown");
  assert.instance(u, RemoteError);
  assert.equal([u.code, u.status, u.message], ["TEST_ERR_UNKNOWN", 418, "teapot"]);
  const p = await err("plain");
  assert.instance(p, RemoteError);
  assert.equal([p.code, p.status, p.message], ["TITO_ERR_REMOTE_FAILED", 500, "boom"]);
  assert.instance(await err("transport"), FrameTooLargeError);
  assert.equal((await pair.client.request({ kind: "ok" })).meta, { fine: true });
});

test("a body source that throws midway fails that body only", async () => {
  handler = async (req) => {
    if (req.meta.kind === "ok") return { meta: {}, body: Buffer.from("fine") };
    async function* broken() {
      yield Buffer.alloc(40_000, 1);
      throw new QuotaError("stream gave out");
    }
    return { meta: { started: true }, body: broken() };
  };
  const res = await pair.client.request({ kind: "broken" });
  assert.equal(res.meta, { started: true });
  let received = 0;
  try {
    for await (const b of res.body) received += b.length;
    assert.unreachable("iteration should throw");
  } catch (e) {
    assert.instance(e, QuotaError);
    assert.is((e as Error).message, "stream gave out");
  }
  assert.ok(received <= 40_000);
  // A source that cannot even start fails the same way, not the process.
  handler = async () => ({
    meta: {},
    body: {
      [Symbol.asyncIterator]: () => {
        throw new Error("no iterator");
      },
    } as AsyncIterable<Buffer>,
  });
  const broken = await pair.client.request({ kind: "no-iterator" });
  await broken.body.collect().then(
    () => assert.unreachable("body should fail"),
    (e) => assert.is((e as Error).message, "no iterator"),
  );
  handler = async (req) => ({ meta: {}, body: req.meta.kind === "ok" ? Buffer.from("fine") : undefined });
  const ok = await pair.client.request({ kind: "ok" });
  assert.is(Buffer.concat(await ok.body.collect()).toString(), "fine");
  // The same holds for a request body the caller streams.
  handler = async (req) => {
    try {
      await req.body.collect();
      return { meta: { failed: false } };
    } catch (e) {
      return { meta: { failed: true, code: (e as { code?: string }).code } };
    }
  };
  async function* brokenUpload() {
    yield Buffer.alloc(100);
    throw new QuotaError("upload gave out");
  }
  assert.equal((await pair.client.request({}, brokenUpload())).meta, { failed: true, code: "TEST_ERR_QUOTA" });
});

test("a streamed buffer's release runs once its bytes are written: a producer reusing it at once corrupts nothing", async () => {
  // Three buffers recycled through a pool, each overwritten with garbage the moment it is
  // released: if a release came before the socket took the bytes, the receiver would see it.
  const size = 40 * 1024; // spans chunk frames (16 KiB): a release must wait for a buffer's last part
  const free = [Buffer.alloc(size), Buffer.alloc(size), Buffer.alloc(size)];
  let allocated = free.length;
  let released = 0;
  const expected: Buffer[] = [];
  handler = async () => {
    async function* chunks() {
      for (let n = 0; n < 40; n++) {
        const buffer = free.pop() ?? (allocated++, Buffer.alloc(size));
        for (let i = 0; i < size; i++) buffer[i] = (n * 31 + i * 7) % 253;
        expected.push(Buffer.from(buffer));
        let once = false;
        const chunk = (n % 3 === 0 ? buffer.subarray(0, size - n) : buffer) as Releasable;
        chunk[WRITTEN] = () => {
          assert.not.ok(once, "released twice");
          once = true;
          released++;
          buffer.fill(0xaa);
          free.push(buffer);
        };
        if (chunk !== buffer) expected[expected.length - 1] = expected[expected.length - 1]!.subarray(0, size - n);
        yield chunk;
      }
    }
    return { meta: {}, body: chunks() };
  };
  const res = await pair.client.request({ op: "pool" });
  const back = await res.body.collect();
  assert.is(sha(back), sha(expected), "every byte as produced, none overwritten by a reuse");
  assert.is(released, 40, "every buffer came back");
  assert.ok(allocated < 40, `buffers were reused (${allocated} allocated for 40 chunks)`);

  // A stream the receiver abandons releases what it had prefetched and not sent.
  let dropped = 0;
  handler = async () => {
    async function* endless() {
      for (;;) {
        const chunk = Buffer.alloc(16 * 1024, 3) as Releasable;
        chunk[WRITTEN] = () => dropped++;
        yield chunk;
      }
    }
    return { meta: {}, body: endless() };
  };
  const ac = new AbortController();
  const stream = await pair.client.request({ op: "endless" }, undefined, { signal: ac.signal });
  await stream.body[Symbol.asyncIterator]().next();
  ac.abort();
  await new Promise((r) => setTimeout(r, 50));
  assert.ok(dropped >= 1, "written or dropped, buffers are handed back");
  assert.is(pair.client.stats().pending, 0);
});

test("abort: the caller gets RequestAbortedError, the handler's signal fires and its stream stops", async () => {
  const started = deferred();
  const handlerSaw = deferred<unknown>();
  const streamStopped = deferred();
  handler = async (req) => {
    if (req.meta.kind === "next") return { meta: { next: true } };
    req.signal.addEventListener("abort", () => handlerSaw.resolve(req.signal.reason));
    started.resolve();
    await new Promise((r) => req.signal.addEventListener("abort", r));
    return { meta: { late: true } }; // must never reach the caller
  };
  const ac = new AbortController();
  const pending = pair.client.request({ kind: "slow" }, undefined, { signal: ac.signal });
  await started.promise;
  ac.abort();
  await pending.then(
    () => assert.unreachable("aborted request resolved"),
    (e) => assert.instance(e, RequestAbortedError),
  );
  assert.instance(await handlerSaw.promise, RequestAbortedError);
  assert.equal((await pair.client.request({ kind: "next" })).meta, { next: true });

  // Abort while the reply body streams: the handler's generator is closed.
  handler = async () => {
    async function* endless() {
      try {
        const b = Buffer.alloc(16 * 1024, 2);
        for (;;) yield b;
      } finally {
        streamStopped.resolve();
      }
    }
    return { meta: {}, body: endless() };
  };
  const ac2 = new AbortController();
  const res = await pair.client.request({}, undefined, { signal: ac2.signal });
  const it = res.body[Symbol.asyncIterator]();
  await it.next();
  ac2.abort();
  await it.next().then(
    () => assert.unreachable("body kept going"),
    (e) => assert.instance(e, RequestAbortedError),
  );
  await streamStopped.promise;
  assert.is(pair.client.stats().pending, 0);
  const already = new AbortController();
  already.abort();
  await pair.client.request({}, undefined, { signal: already.signal }).then(
    () => assert.unreachable(),
    (e) => assert.instance(e, RequestAbortedError),
  );
});

test("a header too large to send fails that request only; chunked bodies are never too large", async () => {
  handler = async (req) => {
    if (req.meta.kind === "fat-reply") return { meta: { blob: "y".repeat(100_000) } };
    return { meta: { i: req.meta.i, bytes: totalBytes(await req.body.collect()) } };
  };
  const fat = pair.client.request({ blob: "x".repeat(100_000) });
  const others = [0, 1, 2].map((i) => pair.client.request({ i }, Buffer.alloc(300_000, i)));
  await fat.then(
    () => assert.unreachable("oversize request sent"),
    (e) => assert.instance(e, FrameTooLargeError),
  );
  for (const [i, p] of others.entries()) assert.equal((await p).meta, { i, bytes: 300_000 });
  await pair.client.request({ kind: "fat-reply" }).then(
    () => assert.unreachable("oversize reply sent"),
    (e) => assert.instance(e, FrameTooLargeError),
  );
  assert.equal((await pair.client.request({ i: 9 })).meta, { i: 9, bytes: 0 });
  assert.not.ok(pair.client.closed);
  assert.not.ok(pair.server.closed);
});

test("either side may serve: the accepting side sends a request to the connecting side", async () => {
  pair.client.serve(async (req) => ({ meta: { from: "client", echo: req.meta.x } }));
  assert.equal((await pair.server.request({ x: 5 })).meta, { from: "client", echo: 5 });
  assert.throws(() => pair.client.serve(async () => ({ meta: {} })), /already has a handler/);
});

test.run();
