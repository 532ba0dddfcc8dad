// Forks of the token store (sessions/checkpoints.ts fork, Trajectory.forkAt; issue 43): a
// fork shares its prefix's chunks copy-on-write, and no write on either side (a later
// turn, a rollback writing a tail back) ever shows on the other; checked against the
// obvious model, a full copy of every checkpoint per store.
import { test } from "uvu";
import * as assert from "uvu/assert";
import fc from "fast-check";
import { Checkpoints } from "../../sessions/checkpoints.ts";
import { Trajectory } from "../../sessions/trajectory.ts";
import type { ChatMessage } from "../../sessions/chat-template.ts";

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

function assertSame(store: Checkpoints, model: number[][], what: string) {
  assert.is(store.count, model.length, `${what}: count`);
  model.forEach((ids, k) => {
    assert.is(store.lengthOf(k), ids.length, `${what}: length of ${k}`);
    assert.equal(store.ids(k), ids, `${what}: checkpoint ${k}`);
  });
  const current = model[model.length - 1] ?? [];
  assert.is(store.length, current.length, `${what}: length`);
  for (const i of [0, current.length >> 1, current.length - 1])
    if (i >= 0 && i < current.length) assert.is(store.at(i), current[i], `${what}: id ${i}`);
}

test("a fork shares its prefix's chunks: it owns nothing until it writes", () => {
  const parent = new Checkpoints();
  let ids: number[] = [];
  for (let k = 0; k < 8; k++) {
    const prompt = [...ids, ...range(10_000 * k, 4000)];
    parent.push(prompt, range(10_000 * k + 5000, 100));
    ids = [...prompt, ...range(10_000 * k + 5000, 100)];
  }
  const before = parent.ownedCapacity;
  assert.ok(before >= ids.length, "the parent owns its chunks");
  const fork = parent.fork(8);
  assert.is(fork.ownedCapacity, 0, "a fork at the last turn copies no id");
  assert.is(fork.capacity, parent.capacity, "and reads the parent's chunks");
  assert.is(parent.ownedCapacity, 0, "both sides copy before they write from now on");
  // One more turn on the fork copies only the chunk it writes into (and what it appends).
  fork.push([...ids, 1, 2, 3], [4]);
  assert.is(fork.ownedCapacity, 64, "the fork owns the slots it wrote, not a copy of the ids it shares");
  assertSame(parent, parentModel(), "parent after the fork's turn");
  const early = parent.fork(2);
  assert.is(early.count, 2);
  assert.is(early.capacity, Math.ceil(parent.lengthOf(1) / 4096) * 4096, "a fork holds only the chunks its ids need");

  function parentModel(): number[][] {
    const model: number[][] = [];
    let acc: number[] = [];
    for (let k = 0; k < 8; k++) {
      acc = [...acc, ...range(10_000 * k, 4000), ...range(10_000 * k + 5000, 100)];
      model.push(acc);
    }
    return model;
  }
});

test("forks of forks, each a turn in the same chunk: each reads its own path, none copies what it shares", () => {
  // Ids of every width (id-chunk.ts: below 65536, below 2^24, and wider or negative).
  const idOf = (k: number, i: number) => [7 * i + k, 70_000 + 13 * i + k, 2 ** 25 + i + k, -1 - i - k][(i + k) % 4]!;
  let store = new Checkpoints();
  let ids = Array.from({ length: 4100 }, (_, i) => idOf(0, i));
  store.push(ids, [1]);
  ids = [...ids, 1];
  const generations: { store: Checkpoints; ids: number[] }[] = [{ store, ids }];
  for (let g = 1; g <= 12; g++) {
    const fork = store.fork(store.count);
    const prompt = [...ids, ...Array.from({ length: 5 }, (_, i) => idOf(g, i))];
    fork.push(prompt, [g]);
    assert.ok(fork.ownedCapacity <= 128, `generation ${g} owns ${fork.ownedCapacity} slots, not a copy`);
    ids = [...prompt, g];
    store = fork;
    generations.push({ store, ids });
  }
  for (const [g, { store: s, ids: want }] of generations.entries()) {
    assert.equal(s.ids(s.count - 1), want, `generation ${g}`);
    const out = new Int32Array(want.length);
    s.copyInto(s.count - 1, out);
    assert.equal(Array.from(out), want, `generation ${g}: copyInto`);
    assert.is(s.mismatch(want, want.length), want.length, `generation ${g}: mismatch`);
    const other = [...want];
    other[want.length - 3] = 5;
    assert.is(s.mismatch(other, other.length), want.length - 3, `generation ${g}: mismatch finds the change`);
  }
  // A rollback below where the last generation's chunk starts its own ids makes it whole again.
  const last = generations[generations.length - 1]!;
  last.store.truncate(1);
  last.store.push([...generations[0]!.ids.slice(0, 4098), 9, 9], [3]);
  assert.equal(last.store.ids(1), [...generations[0]!.ids.slice(0, 4098), 9, 9, 3]);
  for (const [g, { store: s, ids: want }] of generations.slice(0, -1).entries())
    assert.equal(s.ids(s.count - 1), want, `generation ${g} after the last one's rollback`);
});

test("a fork of a checkpoint whose last ids a later prompt overwrote gets them back (its tail)", () => {
  const STOP = 77;
  const parent = new Checkpoints();
  parent.push([1, 2], [3, STOP]);
  parent.push([1, 2, 3, 50, 51], [4, STOP]); // drops the first turn's stop id
  const fork = parent.fork(1);
  assertSame(fork, [[1, 2, 3, STOP]], "fork");
  assertSame(
    parent,
    [
      [1, 2, 3, STOP],
      [1, 2, 3, 50, 51, 4, STOP],
    ],
    "parent",
  );
  fork.push([1, 2, 3, 60], [61]);
  parent.truncate(1);
  parent.push([1, 2, 3, 70], [71]);
  assertSame(
    fork,
    [
      [1, 2, 3, STOP],
      [1, 2, 3, 60, 61],
    ],
    "fork after turns on both",
  );
  assertSame(
    parent,
    [
      [1, 2, 3, STOP],
      [1, 2, 3, 70, 71],
    ],
    "parent after turns on both",
  );
});

test("any mix of commits, rollbacks and forks on any store reads back as full copies would", () => {
  const op = fc.oneof(
    fc.record({
      kind: fc.constant("push" as const),
      on: fc.nat(),
      keep: fc.nat({ max: 3 }), // ids of the previous checkpoint the prompt leaves out at its end
      prompt: fc.integer({ min: 0, max: 3000 }),
      completion: fc.array(fc.integer({ min: 0, max: 9 }), { maxLength: 5 }),
      seed: fc.integer({ min: -5, max: 2 ** 26 }),
    }),
    fc.record({ kind: fc.constant("rollback" as const), on: fc.nat(), turns: fc.nat({ max: 8 }) }),
    fc.record({ kind: fc.constant("fork" as const), on: fc.nat(), at: fc.nat() }),
  );
  fc.assert(
    fc.property(fc.array(op, { maxLength: 30 }), (ops) => {
      const stores = [new Checkpoints()];
      const models: number[][][] = [[]];
      for (const o of ops) {
        const i = o.on % stores.length;
        const store = stores[i]!;
        const model = models[i]!;
        if (o.kind === "rollback") {
          store.truncate(o.turns);
          model.length = Math.min(model.length, o.turns);
        } else if (o.kind === "fork") {
          if (model.length === 0) continue;
          const count = (o.at % model.length) + 1;
          stores.push(store.fork(count));
          models.push(model.slice(0, count));
        } else {
          const previous = model[model.length - 1] ?? [];
          const prompt = [...previous.slice(0, Math.max(0, previous.length - o.keep)), ...range(o.seed, o.prompt)];
          store.push(prompt, o.completion);
          model.push([...prompt, ...o.completion]);
        }
        stores.forEach((s, j) => assertSame(s, models[j]!, `store ${j}`));
      }
    }),
    { numRuns: 150 },
  );
});

test("Trajectory.forkAt: the path up to a turn, then each side on its own", () => {
  const t = new Trajectory("root");
  const msg = (role: string, content: string) => ({ role, content });
  const history = [msg("user", "u0"), msg("assistant", "a0")];
  t.commit({ promptIds: [1, 2], completionIds: [3], messages: [...history] }, 0);
  history.push(msg("user", "u1"), msg("assistant", "a1"));
  t.commit({ promptIds: [1, 2, 3, 4], completionIds: [5], messages: [...history] }, 0);
  history.push(msg("user", "u2"), msg("assistant", "a2"));
  t.commit({ promptIds: [1, 2, 3, 4, 5, 6], completionIds: [7], messages: [...history] }, 0);
  t.clientApi = "chat";
  const fork = t.forkAt(1, "child");
  assert.is(fork.id, "child");
  assert.is(fork.routingKey, "root");
  assert.is(fork.forkAt(0, "grandchild").routingKey, "root", "a fork of a fork keeps the root's routing key");
  assert.is(fork.assistantCount, 2);
  assert.equal(fork.messages, history.slice(0, 4));
  assert.equal(fork.currentIds, [1, 2, 3, 4, 5]);
  assert.is(fork.clientApi, "chat");
  fork.commit({ promptIds: [1, 2, 3, 4, 5, 8], completionIds: [9], messages: [...history.slice(0, 4)] }, 0);
  assert.equal(fork.currentIds, [1, 2, 3, 4, 5, 8, 9]);
  assert.equal(t.currentIds, [1, 2, 3, 4, 5, 6, 7], "the parent is untouched");
  t.rollbackTo(1);
  assert.equal(fork.checkpoints.ids(1), [1, 2, 3, 4, 5], "a rollback of the parent leaves the fork");
  assert.throws(() => t.forkAt(1, "x"), /turn 1 of 1/);
  assert.throws(() => t.forkAt(-1, "x"), /turn -1/);
});

test("a turn's re-sent history keeps the session's message objects: forks share its text", () => {
  const t = new Trajectory("root");
  // Each request parses its own objects (here: structuredClone), equal to the kept ones.
  const parsed = (messages: ChatMessage[]) => structuredClone(messages);
  const user = { role: "user", content: "a long tool output ".repeat(100) };
  const call = { role: "assistant", content: "", tool_calls: [{ id: "c1", arguments: { x: 1.5 } }] };
  t.commit({ promptIds: [1], completionIds: [2], messages: parsed([user, call]) }, 0);
  const kept = t.messages;
  const next = parsed([user, call, { role: "tool", content: "ok" }, { role: "assistant", content: "done" }]);
  t.commit({ promptIds: [1, 2, 3], completionIds: [4], messages: next }, 0);
  assert.ok(t.messages[0] === kept[0], "an equal text message is the kept object");
  assert.ok(t.messages[1] !== kept[1], "a message with non-string fields stays the request's own");
  assert.equal(t.messages, [user, call, { role: "tool", content: "ok" }, { role: "assistant", content: "done" }]);
  // A fork's first turn re-sends the whole history: it shares the parent's objects.
  const fork = t.forkAt(1, "child");
  const branch = parsed([...t.messages, { role: "user", content: "branch" }, { role: "assistant", content: "b" }]);
  fork.commit({ promptIds: [1, 2, 3, 4, 5], completionIds: [6], messages: branch }, 0);
  for (const i of [0, 2, 3]) assert.ok(fork.messages[i] === t.messages[i], `message ${i} shared with the parent`);
  // A message that differs (another content, or its keys in another order) is not shared.
  const reordered = parsed([{ content: user.content, role: "user" } as ChatMessage]);
  const other = new Trajectory("other");
  other.commit({ promptIds: [1], completionIds: [2], messages: [user] }, 0);
  other.commit({ promptIds: [1, 2], completionIds: [3], messages: reordered }, 0);
  assert.ok(other.messages[0] !== user, "another key order keeps the request's object");
});

test.run();
