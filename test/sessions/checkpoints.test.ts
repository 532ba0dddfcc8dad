// The token store of a session (sessions/checkpoints.ts): one growing chunked store of
// ids (2 bytes per id below 65536, 3 below 2^24, else 4: sessions/id-chunk.ts), each
// checkpoint an offset into it, rollback truncates; checked against the obvious model (a
// full copy per checkpoint), including the boundary ids a later prompt overwrites.
import { test } from "uvu";
import * as assert from "uvu/assert";
import fc from "fast-check";
import { Checkpoints } from "../../sessions/checkpoints.ts";
import { Trajectory } from "../../sessions/trajectory.ts";

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** Every checkpoint, read back through the view, equals its model copy. */
function assertSame(store: Checkpoints, model: number[][], what = "") {
  assert.is(store.count, model.length, `${what} count`);
  model.forEach((ids, k) => {
    assert.is(store.lengthOf(k), ids.length, `${what} length of ${k}`);
    assert.equal(store.ids(k), ids, `${what} checkpoint ${k}`);
    assert.equal(
      ids.map((_, i) => store.idAt(k, i)),
      ids,
      `${what} idAt of ${k}`,
    );
  });
  const current = model[model.length - 1] ?? [];
  assert.is(store.length, current.length, `${what} length`);
  assert.equal(
    current.map((_, i) => store.at(i)),
    current,
    `${what} current`,
  );
}

test("appends fill a doubling first chunk, then 16 KiB chunks; checkpoints are offsets, not copies", () => {
  const store = new Checkpoints();
  assert.is(store.capacity, 0, "nothing allocated before the first turn");
  const model: number[][] = [];
  let ids: number[] = [];
  for (let k = 0; k < 40; k++) {
    const prompt = [...ids, ...range(1000 * k, 100)];
    const completion = range(1000 * k + 500, 20);
    store.push(prompt, completion);
    ids = [...prompt, ...completion];
    model.push(ids);
    assert.is(store.promptLengthOf(k), prompt.length);
    // A short session holds at most twice its ids (at least 256); a long one less than one chunk more.
    const want =
      ids.length <= 4096 ? Math.max(256, 2 ** Math.ceil(Math.log2(ids.length))) : Math.ceil(ids.length / 4096) * 4096;
    assert.is(store.capacity, want, `capacity after turn ${k} (${ids.length} ids)`);
  }
  assertSame(store, model);
  assert.equal(store.ids(39, 5), [0, 1, 2, 3, 4]);
  assert.equal(store.ids(39, 4100).slice(4090), ids.slice(4090, 4100), "across a chunk boundary");
});

test("rollback truncates to a checkpoint; a commit after it extends that checkpoint", () => {
  const store = new Checkpoints();
  store.push([1, 2, 3], [4, 5]);
  store.push([1, 2, 3, 4, 5, 6], [7]);
  store.push([1, 2, 3, 4, 5, 6, 7, 8], [9, 10]);
  store.truncate(2);
  assertSame(store, [
    [1, 2, 3, 4, 5],
    [1, 2, 3, 4, 5, 6, 7],
  ]);
  assert.is(store.length, 7);
  store.truncate(5); // more than it holds: nothing changes
  assert.is(store.count, 2);
  store.push([1, 2, 3, 4, 5, 6, 7, 20], [21]);
  assertSame(store, [
    [1, 2, 3, 4, 5],
    [1, 2, 3, 4, 5, 6, 7],
    [1, 2, 3, 4, 5, 6, 7, 20, 21],
  ]);
  store.truncate(0);
  assertSame(store, []);
  assert.is(store.capacity, 0, "an emptied session lets its array go");
  store.push([9], [8]);
  assertSame(store, [[9, 8]]);
});

test("ids a later prompt overwrites (GLM's stop id) stay their checkpoint's, through rollbacks", () => {
  const STOP = 77;
  const store = new Checkpoints();
  store.push([1, 2], [3, STOP]);
  // The next prompt drops the stop id and writes its own opener there.
  store.push([1, 2, 3, 50, 51], [4, STOP]);
  store.push([1, 2, 3, 50, 51, 4, 60], [5]);
  const model = [
    [1, 2, 3, STOP],
    [1, 2, 3, 50, 51, 4, STOP],
    [1, 2, 3, 50, 51, 4, 60, 5],
  ];
  assertSame(store, model);
  store.truncate(2);
  assertSame(store, model.slice(0, 2), "after a rollback to turn 2");
  store.push([1, 2, 3, 50, 51, 4, 61], [6]);
  assertSame(store, [...model.slice(0, 2), [1, 2, 3, 50, 51, 4, 61, 6]], "after a new turn 3");
  store.truncate(1);
  assertSame(store, model.slice(0, 1), "after a rollback to turn 1");
  // A shorter next checkpoint (its prompt trims the stop id, nothing generated).
  store.push([1, 2, 3], []);
  assertSame(store, [model[0]!, [1, 2, 3]]);
  store.truncate(1);
  assertSame(store, model.slice(0, 1));
});

test("any sequence of commits and rollbacks reads back as the full copies would", () => {
  const op = fc.oneof(
    fc.record({
      kind: fc.constant("push" as const),
      keep: fc.nat({ max: 3 }), // ids of the previous checkpoint the prompt leaves out at its end
      same: fc.nat({ max: 400 }), // of the ids it keeps, how many push() is told are copied
      prompt: fc.array(fc.integer({ min: 0, max: 2 ** 31 - 1 }), { maxLength: 300 }),
      completion: fc.array(fc.integer({ min: 0, max: 9 }), { maxLength: 5 }),
    }),
    fc.record({ kind: fc.constant("rollback" as const), turns: fc.nat({ max: 12 }) }),
  );
  fc.assert(
    fc.property(fc.array(op, { maxLength: 25 }), (ops) => {
      const store = new Checkpoints();
      const model: number[][] = [];
      for (const o of ops) {
        if (o.kind === "rollback") {
          store.truncate(o.turns);
          model.length = Math.min(model.length, o.turns);
        } else {
          const previous = model[model.length - 1] ?? [];
          const kept = Math.max(0, previous.length - o.keep);
          const prompt = [...previous.slice(0, kept), ...o.prompt];
          store.push(prompt, o.completion, Math.min(o.same, kept));
          model.push([...prompt, ...o.completion]);
        }
        assertSame(store, model);
      }
    }),
    { numRuns: 300 },
  );
});

test("a chunk takes 2 bytes per id below 65536, 3 once one needs 24 bits, 4 for any other id", () => {
  const store = new Checkpoints();
  const small = range(0, 4096).map((i) => (i * 16) % 65536);
  store.push(small, [65535]);
  assert.is(store.capacity, 8192);
  assert.is(store.bytes, 2 * 8192, "every id below 65536: 2 bytes per slot");
  // Chunk 1 gets one id of Qwen3's upper range (151k): only that chunk adds its high plane.
  const big = [...small, 65535, 70, 151_642, 3];
  store.push(big, [0xffffff]);
  assert.is(store.bytes, 2 * 4096 + 3 * 4096, "the chunk with ids >= 65536 at 3 bytes, the other at 2");
  assertSame(store, [
    [...small, 65535],
    [...big, 0xffffff],
  ]);
  // An id no vocabulary has (negative, or 2^24 and up) keeps its chunk as int32, unchanged.
  const odd = [...big, 0xffffff, -5, 2 ** 31 - 1];
  store.push(odd, [7]);
  assert.is(store.bytes, 2 * 4096 + 4 * 4096);
  assertSame(store, [
    [...small, 65535],
    [...big, 0xffffff],
    [...odd, 7],
  ]);
  store.truncate(1);
  assertSame(store, [[...small, 65535]], "a rollback across the widened chunk");
});

test("ids of mixed widths read back as the full copies would, across chunks and rollbacks", () => {
  const id = fc.oneof(
    fc.integer({ min: 0, max: 65535 }),
    fc.integer({ min: 65536, max: 2 ** 24 - 1 }),
    fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
  );
  fc.assert(
    fc.property(
      fc.array(
        fc.record({ rollback: fc.nat({ max: 4 }), n: fc.nat({ max: 3000 }), odd: fc.array(id, { maxLength: 4 }) }),
        {
          maxLength: 8,
        },
      ),
      (turns) => {
        const store = new Checkpoints();
        const model: number[][] = [];
        turns.forEach((t, k) => {
          if (t.rollback === 0 && model.length > 0) {
            store.truncate(model.length - 1);
            model.length--;
          }
          const previous = model[model.length - 1] ?? [];
          const prompt = [...previous, ...range(k * 7, t.n), ...t.odd];
          store.push(prompt, [k]);
          model.push([...prompt, k]);
        });
        assertSame(store, model);
      },
    ),
    { numRuns: 60 },
  );
});

test("a trajectory keeps one tools object for consecutive turns with equal tools", () => {
  const t = new Trajectory("tools");
  const tools = () => [{ type: "function", function: { name: "f", parameters: { type: "object" } } }];
  const first = tools();
  t.commit({ promptIds: [1], completionIds: [2], messages: [], tools: first }, 0);
  t.commit({ promptIds: [1, 2, 3], completionIds: [4], messages: [], tools: tools() }, 0);
  assert.is(t.lastTools, first, "an equal copy is not kept");
  const other = [{ type: "function", function: { name: "g" } }];
  t.commit({ promptIds: [1, 2, 3, 4, 5], completionIds: [6], messages: [], tools: other }, 0);
  assert.is(t.lastTools, other);
  t.rollbackTo(2);
  assert.is(t.lastTools, first);
  assert.equal(t.currentIds, [1, 2, 3, 4]);
});

test("mismatch: the first id that differs, for a typed array or a list, across chunks", () => {
  const store = new Checkpoints();
  const ids = range(7, 10_000);
  store.push(ids.slice(0, 9_000), ids.slice(9_000));
  const typed = Int32Array.from(ids);
  assert.is(store.mismatch(typed, ids.length), ids.length);
  assert.is(store.mismatch(ids, ids.length), ids.length);
  for (const at of [0, 4_095, 4_096, 9_999]) {
    const changed = typed.slice();
    changed[at] = -1;
    assert.is(store.mismatch(changed, ids.length), at, `typed, changed at ${at}`);
    assert.is(store.mismatch(Array.from(changed), ids.length), at, `list, changed at ${at}`);
    assert.is(store.mismatch(changed, at), at, `only the first ${at} compared`);
    assert.is(store.mismatch(changed, ids.length, at), at, `compared from ${at}`);
    assert.is(store.mismatch(changed, ids.length, at + 1), ids.length, `compared from past ${at}`);
    assert.is(store.mismatch(changed, at, ids.length), at, `from past n: nothing compared`);
  }
});

test("ids a turn copied from the latest checkpoint are not compared again, at that version only", () => {
  const t = new Trajectory("c");
  const prompt = range(1, 9_000);
  t.commit({ promptIds: prompt, completionIds: [5, 6], messages: [] }, 0);
  const bad = Int32Array.from([...prompt, 5, 6, 7]);
  bad[100] = -1; // a copied id changed after the copy: only a comparison would see it
  const turn = (copiedFrom?: { version: number; ids: number }) => ({
    promptIds: bad,
    completionIds: [8],
    messages: [],
    copiedFrom,
  });
  const differs = (err: Error) => err.message.includes("first difference at token 100 ");
  assert.throws(() => t.verify(turn(), 0), differs, "nothing copied");
  assert.throws(() => t.verify(turn({ version: t.version - 1, ids: 9_002 }), 0), differs, "copied at another version");
  assert.throws(() => t.verify(turn({ version: t.version, ids: 100 }), 0), differs, "copied up to the id");
  t.verify(turn({ version: t.version, ids: 9_002 }), 0);
  const ok = Int32Array.from([...prompt, 5, 6, 7]);
  t.commit({ promptIds: ok, completionIds: [8], messages: [], copiedFrom: { version: t.version, ids: 9_002 } }, 0);
  assert.equal(t.currentIds, [...prompt, 5, 6, 7, 8]);
  assert.throws(
    () => t.verify({ ...turn({ version: t.version, ids: 9_000 }), promptIds: Int32Array.from([...ok, 9]) }, 0),
    (err: Error) => err.message.includes("first difference at token 9003 "),
    "past the copied ids",
  );
});

test("verify names the first prompt id that differs from the previous checkpoint, wherever it is", () => {
  const t = new Trajectory("v");
  const prompt = range(1, 9_000);
  t.commit({ promptIds: prompt, completionIds: [5, 6], messages: [] }, 0);
  const next = Int32Array.from([...prompt, 5, 6, 7]);
  t.verify({ promptIds: next, completionIds: [8], messages: [] }, 0);
  for (const at of [3, 8_500, 9_001]) {
    const bad = next.slice();
    bad[at] = -1;
    assert.throws(
      () => t.verify({ promptIds: bad, completionIds: [8], messages: [] }, 0),
      (err: Error) => err.message.includes(`first difference at token ${at} `),
      `changed at ${at}`,
    );
  }
});

test.run();
