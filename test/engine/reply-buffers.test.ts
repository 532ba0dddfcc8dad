// Pooled receive buffers for large engine replies: bytes kept exactly across slab
// boundaries, slabs reused only after release, pushes after release ignored.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { ReplyBuffers, SLAB_BYTES } from "../../engine/reply-buffers.ts";

function pattern(n: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) % 251;
  return b;
}

test("chunks of any size land in slabs byte for byte; release hands the slabs back once", () => {
  const pool = new ReplyBuffers({ keepBytes: 4 * SLAB_BYTES });
  const c = pool.collector();
  const chunks = [
    pattern(65536, 1),
    pattern(SLAB_BYTES - 65536 + 7, 2),
    pattern(3, 3),
    pattern(2 * SLAB_BYTES + 11, 4),
  ];
  for (const chunk of chunks) c.push(chunk);
  const parts = c.parts();
  assert.is(parts.length, 4, "3 MiB + 21 bytes: four slabs");
  assert.ok(Buffer.concat(parts).equals(Buffer.concat(chunks)));
  assert.is(pool.pooled, 0);
  c.release();
  c.release();
  assert.is(pool.pooled, 4, "kept up to the limit, handed back once");
  c.push(pattern(10, 5)); // after release: ignored, no slab taken
  assert.is(pool.pooled, 4);
});

test("a later reply reuses released slabs, and its bytes are its own", () => {
  const pool = new ReplyBuffers({ keepBytes: 8 * SLAB_BYTES });
  const first = pool.collector();
  first.push(pattern(SLAB_BYTES + 5, 9));
  first.release();
  assert.is(pool.pooled, 2);
  const second = pool.collector();
  const data = pattern(1000, 42);
  second.push(data);
  assert.is(pool.pooled, 1, "one slab taken from the pool");
  assert.ok(Buffer.concat(second.parts()).equals(data));
  const empty = pool.collector();
  assert.equal(empty.parts(), [], "no bytes: no slabs");
  empty.release();
  second.release();
  assert.is(pool.pooled, 2);
});

test("replies of known length are admitted within the budget, the rest wait in order; a lone reply always goes", () => {
  const pool = new ReplyBuffers({ budgetBytes: 10 * SLAB_BYTES });
  const admitted: string[] = [];
  const a = pool.collector(6 * SLAB_BYTES);
  const b = pool.collector(4 * SLAB_BYTES);
  const c = pool.collector(3 * SLAB_BYTES);
  const d = pool.collector(1 * SLAB_BYTES);
  c.whenAdmitted(() => admitted.push("c"));
  d.whenAdmitted(() => admitted.push("d"));
  assert.ok(a.admitted && b.admitted, "6 + 4 MiB fill the 10 MiB budget");
  assert.ok(!c.admitted && !d.admitted, "and the next wait; a small one does not overtake");
  assert.is(pool.reserved, 10 * SLAB_BYTES);
  assert.is(pool.waiting, 2);
  b.release();
  assert.equal(admitted, ["c", "d"], "4 MiB freed: 3 + 1 MiB admitted, in order");
  assert.is(pool.reserved, 10 * SLAB_BYTES);
  const huge = pool.collector(50 * SLAB_BYTES);
  let hugeIn = false;
  huge.whenAdmitted(() => (hugeIn = true));
  a.release();
  c.release();
  assert.not.ok(hugeIn, "over the budget while others are held");
  d.release();
  assert.ok(hugeIn, "alone, a reply over the budget is admitted");
  const unknown = pool.collector();
  assert.ok(unknown.admitted, "a reply of unknown length reserves nothing");
  huge.release();
  unknown.release();
  assert.is(pool.reserved, 0);
});

test("a waiting reply that is released (its request failed) leaves the queue and is never admitted", () => {
  const pool = new ReplyBuffers({ budgetBytes: 2 * SLAB_BYTES });
  const held = pool.collector(2 * SLAB_BYTES);
  const gone = pool.collector(SLAB_BYTES);
  const next = pool.collector(SLAB_BYTES);
  let goneIn = false;
  gone.whenAdmitted(() => (goneIn = true));
  gone.release();
  assert.is(pool.waiting, 1);
  held.release();
  assert.not.ok(goneIn);
  assert.ok(next.admitted);
  next.release();
  assert.is(pool.reserved, 0);
  assert.is(pool.waiting, 0);
});

test.run();
