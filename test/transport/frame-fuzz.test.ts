// Fuzzing the frame decoder (fast-check): random bytes, frames with damaged bytes, cut
// short or with lengths past the corruption guard, in random chunkings. The decoder
// either delivers frames or throws one of its two coded errors, never anything else and
// never loops; undamaged frames round-trip exactly. Through a real socket, whatever a
// peer writes ends in a clean close of its channel (within a bound) with no uncaught
// error, and the listener goes on serving well-behaved peers. Run counts are printed.
import { test } from "uvu";
import * as assert from "uvu/assert";
import fc from "fast-check";
import { connect } from "node:net";
import { encodeHead, FrameDecoder, HEAD_BYTES, type FrameSink } from "../../transport/frame-codec.ts";
import { FrameTooLargeError, ProtocolError, listenChannels, connectChannel } from "../../transport/index.ts";
import type { ChannelServer } from "../../transport/index.ts";
import { tempDir } from "./pair.ts";

const MAX = 4096;
const dir = tempDir("tito-frame-fuzz-");
let listener: ChannelServer;
const closes: (Error | undefined)[] = [];
const uncaught: unknown[] = [];
const onUncaught = (err: unknown) => uncaught.push(err);

test.before(async () => {
  process.on("uncaughtException", onUncaught);
  process.on("unhandledRejection", onUncaught);
  listener = await listenChannels(
    dir.path("fuzz.sock"),
    (channel) => {
      channel.onClose((err) => closes.push(err));
      channel.serve(async (req) => ({ meta: { echo: req.meta }, body: Buffer.concat(await req.body.collect()) }));
    },
    { maxFrameBytes: MAX, chunkBytes: 1024 },
  );
});
test.after(async () => {
  await listener?.close();
  dir.remove();
  process.off("uncaughtException", onUncaught);
  process.off("unhandledRejection", onUncaught);
});

interface Decoded {
  kind: number;
  flags: number;
  id: number;
  meta: unknown;
  body: Buffer;
}

function decoder(out: Decoded[]): FrameDecoder {
  let current: Decoded | undefined;
  let parts: Buffer[] = [];
  const sink: FrameSink = {
    frame: (kind, flags, id, meta) => ((current = { kind, flags, id, meta, body: Buffer.alloc(0) }), (parts = [])),
    body: (piece) => parts.push(Buffer.from(piece)),
    frameEnd: () => {
      current!.body = Buffer.concat(parts);
      out.push(current!);
    },
  };
  return new FrameDecoder(sink, MAX);
}

// msgpackr renames a "__proto__" key on decode (no prototype pollution from a peer), so
// that one key cannot round-trip; the shard protocol never sends it.
const metaArb = fc.oneof(
  fc.constant(undefined),
  fc.dictionary(
    fc.string({ maxLength: 8 }).filter((k) => k !== "__proto__"),
    fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null)),
    {
      maxKeys: 4,
    },
  ),
  fc.integer(),
);
const frameArb = fc.record({
  kind: fc.integer({ min: 0, max: 255 }),
  flags: fc.integer({ min: 0, max: 255 }),
  id: fc.integer({ min: 0, max: 2 ** 48 - 1 }),
  meta: metaArb,
  body: fc.uint8Array({ maxLength: 300 }),
});
type FrameSpec = { kind: number; flags: number; id: number; meta: unknown; body: Uint8Array };
const encode = (f: FrameSpec) =>
  Buffer.concat([encodeHead(f.kind, f.flags, f.id, f.meta, f.body.length, MAX), Buffer.from(f.body)]);

/** A fixed head with a chosen length field (past the guard, below a head, or a lie about the header). */
const badHeadArb = fc
  .record({
    length: fc.oneof(
      fc.integer({ min: MAX + 1, max: 0xffffffff }),
      fc.integer({ min: 0, max: 11 }),
      fc.integer({ min: 12, max: MAX }),
    ),
    metaLen: fc.oneof(fc.integer({ min: 0, max: 64 }), fc.integer({ min: 0, max: 0xffffffff })),
    kind: fc.integer({ min: 0, max: 255 }),
  })
  .map(({ length, metaLen, kind }) => {
    const head = Buffer.alloc(HEAD_BYTES);
    head.writeUInt32LE(length, 0);
    head[4] = kind;
    head.writeUInt32LE(metaLen, 12);
    return head;
  });

/** A stream: good frames, damaged frames, bad heads and raw bytes, maybe cut short. */
const streamArb = fc
  .tuple(
    fc.array(
      fc.oneof(
        frameArb.map(encode),
        fc
          .tuple(frameArb.map(encode), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 1, max: 255 })), { maxLength: 4 }))
          .map(([bytes, flips]) => {
            for (const [at, x] of flips) bytes[at % bytes.length] ^= x;
            return bytes;
          }),
        badHeadArb,
        fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
      ),
      { maxLength: 6 },
    ),
    fc.option(fc.nat(), { nil: undefined }),
  )
  .map(([pieces, cut]) => {
    const all = Buffer.concat(pieces);
    return cut === undefined || all.length === 0 ? all : all.subarray(0, cut % all.length);
  });

const chunked = (bytes: Buffer, cuts: number[]): Buffer[] => {
  const at = [...new Set(cuts.map((c) => (bytes.length ? c % bytes.length : 0)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const c of [...at, bytes.length]) {
    if (c > from) out.push(bytes.subarray(from, c));
    from = Math.max(from, c);
  }
  return out;
};

const RUNS = { decoder: 5000, roundTrip: 1000, socket: 400 };

test(`decoder: any bytes in any chunking give frames or a coded error (${RUNS.decoder} cases)`, () => {
  fc.assert(
    fc.property(streamArb, fc.array(fc.nat(), { maxLength: 8 }), (bytes, cuts) => {
      const out: Decoded[] = [];
      const d = decoder(out);
      try {
        for (const chunk of chunked(bytes, cuts)) d.push(chunk);
      } catch (err) {
        if (!(err instanceof FrameTooLargeError || err instanceof ProtocolError)) throw err;
      }
    }),
    { numRuns: RUNS.decoder },
  );
});

test(`decoder: undamaged frames round-trip exactly, in any chunking (${RUNS.roundTrip} cases)`, () => {
  fc.assert(
    fc.property(fc.array(frameArb, { maxLength: 5 }), fc.array(fc.nat(), { maxLength: 8 }), (frames, cuts) => {
      const out: Decoded[] = [];
      const d = decoder(out);
      for (const chunk of chunked(Buffer.concat(frames.map(encode)), cuts)) d.push(chunk);
      assert.equal(
        out.map((f) => ({ ...f, body: [...f.body] })),
        // (fast-check's dictionaries have no prototype; decoded ones are plain objects)
        frames.map((f) => ({ ...f, meta: typeof f.meta === "object" ? { ...f.meta } : f.meta, body: [...f.body] })),
      );
    }),
    { numRuns: RUNS.roundTrip },
  );
});

/** Writes `bytes` from a raw socket, ends it, and waits for the server side's channel to close. */
async function throwAtListener(bytes: Buffer, chunks: Buffer[]): Promise<void> {
  const closed = closes.length;
  const socket = connect(dir.path("fuzz.sock"));
  socket.on("error", () => {}); // the channel may cut the connection while we write
  socket.on("data", () => {}); // replies to anything that parsed as a request
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  for (const chunk of chunks) socket.write(chunk);
  socket.end();
  const deadline = Date.now() + 5_000;
  while (closes.length === closed) {
    if (Date.now() > deadline) throw new Error(`the channel did not close after ${bytes.length} bytes`);
    await new Promise((resolve) => setImmediate(resolve));
  }
  socket.destroy();
}

test(`socket: whatever a peer writes, its channel closes cleanly and the listener serves on (${RUNS.socket} cases)`, async () => {
  await fc.assert(
    fc.asyncProperty(streamArb, fc.array(fc.nat(), { maxLength: 4 }), async (bytes, cuts) => {
      await throwAtListener(bytes, chunked(bytes, cuts));
      const err = closes.at(-1);
      assert.ok(
        err === undefined || err instanceof FrameTooLargeError || err instanceof ProtocolError || "code" in err,
        `closed by ${String(err)}`,
      );
      assert.equal(uncaught, [], "nothing escaped as an uncaught error");
    }),
    { numRuns: RUNS.socket },
  );
  const good = await connectChannel(dir.path("fuzz.sock"), { maxFrameBytes: MAX, chunkBytes: 1024 });
  const res = await good.request({ op: "ping" }, Buffer.from("still here"));
  assert.equal(res.meta, { echo: { op: "ping" } });
  assert.is(Buffer.concat(await res.body.collect()).toString(), "still here");
  good.close();
  console.log(
    `frame fuzz: decoder ${RUNS.decoder} + round trip ${RUNS.roundTrip} + socket ${RUNS.socket} cases; ` +
      `socket closes by error: ${closes.filter(Boolean).length}, clean: ${closes.filter((e) => !e).length}`,
  );
});

test.run();
