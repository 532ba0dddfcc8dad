// The one buffer pool (reply buffers, record-stream reads, transport read slabs): a burst
// is kept (so its buffers are reused instead of piling up as external memory that forces
// full GCs), and a quiet pool shrinks back.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { mock } from "node:test";
import { BufferPool } from "../../buffers/buffer-pool.ts";

test("a burst is kept up to keepBytes and reused; beyond it buffers are left to the GC", () => {
  const pool = new BufferPool(4096, { keepBytes: 10 * 4096, trimMs: 1000 });
  const burst = Array.from({ length: 12 }, () => pool.take());
  assert.is(pool.allocated, 12);
  for (const b of burst) pool.give(b);
  assert.is(pool.pooled, 10, "ten kept, two dropped");
  const again = Array.from({ length: 10 }, () => pool.take());
  assert.is(pool.allocated, 12, "the second burst allocated nothing");
  assert.ok(
    again.every((b) => burst.includes(b)),
    "the very same buffers",
  );
  assert.is(pool.take().length, 4096, "an empty pool allocates");
  assert.is(pool.allocated, 13);
});

test("buffers taken during an interval stay; ones free throughout it go, down to idleBytes", () => {
  mock.timers.enable({ apis: ["setTimeout"] });
  try {
    const pool = new BufferPool(1024, { keepBytes: 12 * 1024, idleBytes: 2 * 1024, trimMs: 50 });
    const burst = Array.from({ length: 12 }, () => pool.take());
    for (const b of burst) pool.give(b); // the interval starts at the 3rd: more than idleBytes free
    const cycle = (n: number) => Array.from({ length: n }, () => pool.take()).forEach((b) => pool.give(b));
    cycle(8); // 4 stay free, 3 of them since the interval began
    mock.timers.tick(50);
    assert.is(pool.pooled, 9, "the 3 buffers free throughout the interval are dropped");
    cycle(4);
    mock.timers.tick(49);
    assert.is(pool.pooled, 9, "nothing is dropped before the interval ends");
    mock.timers.tick(1);
    assert.is(pool.pooled, 4, "the 4 taken during the interval stay");
    mock.timers.tick(50);
    assert.is(pool.pooled, 2, "a quiet pool shrinks to idleBytes");
    mock.timers.tick(500);
    assert.is(pool.pooled, 2, "and stays there");
    const allocated = pool.allocated;
    pool.take();
    assert.is(pool.allocated, allocated, "what is kept is reused");
  } finally {
    mock.timers.reset();
  }
});

// (Written first for the transport's read slabs, which take their slabs from this pool.)
test("after a burst, free slabs that went unused are let go, down to the idle size", () => {
  mock.timers.enable({ apis: ["setTimeout"] });
  try {
    const pool = new BufferPool(1024, { keepBytes: 16 * 1024, idleBytes: 4 * 1024, trimMs: 40 });
    const slabs = Array.from({ length: 20 }, () => pool.take());
    for (const slab of slabs) pool.give(slab);
    assert.is(pool.pooled, 16, "a burst keeps up to keepBytes");
    // The interval began when the 5th slab came back (more than idleBytes free); 10 taken
    // and given back since, so 5 slabs stayed free throughout it.
    const again = Array.from({ length: 10 }, () => pool.take());
    for (const slab of again) pool.give(slab);
    mock.timers.tick(60);
    assert.is(pool.pooled, 11, "the 5 slabs that stayed free were let go");
    mock.timers.tick(60);
    assert.is(pool.pooled, 4, "a quiet pool shrinks to idleBytes");
    const allocated = pool.allocated;
    pool.take();
    assert.is(pool.allocated, allocated, "what is kept is reused");
  } finally {
    mock.timers.reset();
  }
});

test.run();
