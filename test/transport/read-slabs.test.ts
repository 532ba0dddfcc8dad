// A connecting channel reads into pooled slabs (read-slabs.ts) and hands body pieces on
// as views of them: a slab is reused only once every view of it has been released, so a
// consumer that holds pieces (or never releases them) still sees its own bytes, and one
// that releases keeps the number of slabs flat.

import { test } from "uvu";
import * as assert from "uvu/assert";
import { createHash } from "node:crypto";
import { BufferPool } from "../../buffers/buffer-pool.ts";
import { ReadSlabs, readSlabPool } from "../../transport/read-slabs.ts";
import { release, WRITTEN, type Releasable } from "../../transport/index.ts";
import { channelPair, tempDir, type Pair } from "./pair.ts";

const MiB = 2 ** 20;
const dir = tempDir("tito-slabs-");
let pair: Pair;

// Every byte depends on its offset and the request's seed, so a piece overwritten by a
// later read (a slab reused too early) cannot go unnoticed.
function patterned(seed: number, offset: number, n: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (seed * 31 + (offset + i) * 7 + ((offset + i) >> 9)) & 0xff;
  return b;
}

async function* body(seed: number, total: number, piece = 300 * 1024) {
  for (let off = 0; off < total; off += piece) yield patterned(seed, off, Math.min(piece, total - off));
}

function digest(parts: Buffer[]): string {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return h.digest("hex");
}

test.before(async () => {
  pair = await channelPair(dir.path("slabs.sock"));
  pair.server.serve(async (req) => ({ meta: {}, body: body(Number(req.meta.seed), Number(req.meta.bytes)) }));
});
test.after(async () => {
  await pair.close();
  dir.remove();
});

test("held pieces keep their bytes while later replies stream through the same socket", async () => {
  const bytes = 6 * MiB;
  const first = await pair.client.request({ seed: 1, bytes });
  const held: Buffer[] = [];
  for await (const piece of first.body) held.push(piece); // not released
  assert.ok(held.length > 1);
  assert.ok(
    held.every((p) => typeof (p as Releasable)[WRITTEN] === "function"),
    "every piece carries a release",
  );
  const expected = digest([patterned(1, 0, bytes)]);
  for (let seed = 2; seed < 6; seed++) {
    const next = await pair.client.request({ seed, bytes });
    for await (const piece of next.body) release(piece);
  }
  assert.is(digest(held), expected, "a held piece was overwritten by a later read");
  for (const p of held) release(p);
});

test("released pieces let slabs be reused: many MiB through a bounded set of slabs", async () => {
  const before = readSlabPool.allocated;
  const bytes = 8 * MiB;
  for (let seed = 10; seed < 22; seed++) {
    const res = await pair.client.request({ seed, bytes });
    const h = createHash("sha256");
    for await (const piece of res.body) {
      h.update(piece);
      release(piece);
      release(piece); // a second release is a no-op, not a double free
    }
    assert.is(h.digest("hex"), digest([patterned(seed, 0, bytes)]), `reply ${seed} arrived intact`);
  }
  const grown = readSlabPool.allocated - before;
  // 96 MiB went through; without reuse that is ~400 slabs of 256 KiB.
  assert.ok(grown <= 48, `allocated ${grown} new slabs for 96 MiB`);
});

test("a piece released while its read is still being decoded does not free that slab", () => {
  const pool = new BufferPool(128 * 1024, { keepBytes: 64 * MiB, idleBytes: 8 * MiB });
  const reads = new ReadSlabs(pool);
  const { buffer, callback } = reads.onread();
  const seen: Buffer[] = [];
  reads.attach((chunk) => {
    const a = reads.hold(chunk.subarray(0, 10));
    release(a); // released mid-decode
    seen.push(reads.hold(chunk.subarray(10)));
  });
  // Fill the slab so far that it retires after this read.
  const target = buffer();
  target.fill(0xab, 0, target.length - 1000);
  callback(target.length - 1000);
  assert.is(pool.pooled, 0, "the slab is still held by the second view");
  const again = buffer(); // a fresh slab: the held one must not be handed out
  assert.not.ok(again.buffer === seen[0]!.buffer && again.byteOffset === 0);
  release(seen[0]!);
  assert.is(pool.pooled, 1, "released once nothing holds it");
});

test.run();
