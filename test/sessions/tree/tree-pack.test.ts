// The tree-packed sample and the leaf choice on a hand-built tree: docs/trajectories.md's
// worked 3-leaf example, array for array (every token once, parent links, leaf counts),
// and drop_retries leaving out a superseded node with what was built on it.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { Sample } from "../../../sessions/journal/samples.ts";
import { chooseLeaves, packSamples, treeChoice } from "../../../sessions/tree/tree-samples.ts";
import { TrajectoryTree, type TreeNode } from "../../../sessions/tree/tree.ts";

/** A linear sample of `tokens` whose first `prompt` tokens are the first prompt; `generated` maps index to logprob. */
function sample(tokens: number[], prompt: number, generated: Record<number, number>): Sample {
  const n = tokens.length - prompt;
  const lossMask = new Uint8Array(n);
  const logProbs = new Array<number>(n).fill(0);
  for (const [i, lp] of Object.entries(generated)) {
    lossMask[Number(i) - prompt] = 1;
    logProbs[Number(i) - prompt] = lp;
  }
  const base = { sessionId: "s", status: "completed" as const, turns: [], oldestWeightVersion: null };
  return { ...base, tokens, responseLength: n, lossMask, logProbs };
}

test("the worked example of docs/trajectories.md packs to its arrays", () => {
  const n2 = sample([1, 2, 3, 4, 5, 9, 10], 3, { 3: -0.1, 4: -0.2, 6: -0.5 });
  const n3 = sample([1, 2, 3, 4, 5, 6, 7, 8, 11, 12], 3, { 3: -0.1, 4: -0.2, 6: -0.3, 7: -0.4, 9: -0.6 });
  const n4 = sample([1, 2, 3, 4, 5, 6, 13], 3, { 3: -0.1, 4: -0.2, 6: -0.7 });
  const packed = packSamples("s", ["n2", "n3", "n4"], [n2, n3, n4]);
  assert.equal(packed.tokens, [1, 2, 3, 4, 5, 9, 10, 6, 7, 8, 11, 12, 13]);
  assert.equal(packed.parent, [-1, 0, 1, 2, 3, 4, 5, 4, 7, 8, 9, 10, 7]);
  assert.equal(packed.leafCount, [3, 3, 3, 3, 3, 1, 1, 2, 1, 1, 1, 1, 1]);
  assert.equal(packed.lossMask, [0, 0, 0, 1, 1, 0, 1, 0, 1, 1, 0, 1, 1]);
  assert.equal(packed.logProbs, [0, 0, 0, -0.1, -0.2, 0, -0.5, 0, -0.3, -0.4, 0, -0.6, -0.7]);
  assert.equal(packed.leafEnds, [6, 11, 12]);
});

test("routed experts: a row per packed token, the first leaf's that has one, -1 where none ran", () => {
  const n2 = sample([1, 2, 3, 4, 5, 9, 10], 3, { 3: -0.1, 4: -0.2, 6: -0.5 });
  const n3 = sample([1, 2, 3, 4, 5, 6, 7, 8, 11, 12], 3, { 3: -0.1, 4: -0.2, 6: -0.3, 7: -0.4, 9: -0.6 });
  const n4 = sample([1, 2, 3, 4, 5, 6, 13], 3, { 3: -0.1, 4: -0.2, 6: -0.7 });
  // As the engine returns them: a row per token but the last, here [leaf tag + position, leaf].
  const routed = (s: Sample, leaf: number): Sample => {
    const rows = s.tokens.length - 1;
    const data = Int32Array.from({ length: rows * 2 }, (_, i) => (i % 2 === 0 ? 100 * (leaf + 1) + i / 2 : leaf));
    return { ...s, routedExperts: { data, rows, width: 2 } };
  };
  const packed = packSamples("s", ["n2", "n3", "n4"], [routed(n2, 0), routed(n3, 1), routed(n4, 2)]);
  const rows = packed.routedExperts!;
  assert.equal([rows.rows, rows.width], [packed.tokens.length, 2]);
  const pairs = Array.from({ length: rows.rows }, (_, k) => [rows.data[2 * k], rows.data[2 * k + 1]]);
  // tokens [1, 2, 3, 4, 5, 9, 10, 6, 7, 8, 11, 12, 13]: the shared prefix is n2's rows; 6 is
  // n3's and n4's (n3 first); each leaf's last token (10, 12, 13) has none.
  assert.equal(pairs, [
    [100, 0],
    [101, 0],
    [102, 0],
    [103, 0],
    [104, 0],
    [105, 0],
    [-1, -1],
    [205, 1],
    [206, 1],
    [207, 1],
    [208, 1],
    [-1, -1],
    [-1, -1],
  ]);
  // A leaf without them: none for the packed sample (it would not be aligned).
  assert.is(packSamples("s", ["n2", "n3"], [routed(n2, 0), n3]).routedExperts, undefined);
});

test("leaves all, latest, a list; drop_retries leaves out a superseded node and its subtree", () => {
  const tree = new TrajectoryTree();
  const add = (parent: TreeNode | null, retryOf: string | null = null) =>
    tree.add({
      parent,
      retryOf,
      messages: [],
      ids: { length: 0, at: () => 0, slice: () => [] },
      promptLength: 0,
      finishReason: "stop",
      weightVersion: null,
      timestamp: null,
    });
  const n0 = add(null);
  const n1 = add(n0);
  add(n0); // n2
  add(n1); // n3
  add(n0, "n1"); // n4
  const ids = (body: object) => chooseLeaves(tree, treeChoice(body)).map((n) => n.id);
  assert.equal(ids({}), ["n2", "n3", "n4"]);
  assert.equal(ids({ leaves: "latest" }), ["n4"]);
  assert.equal(ids({ drop_retries: true }), ["n2", "n4"]);
  assert.equal(ids({ leaves: ["n1", "n3"] }), ["n1", "n3"]);
  assert.throws(() => ids({ leaves: ["n9"] }), /not a node of the session/);
  assert.throws(() => ids({ leaves: "some" }), /leaves must be/);
  assert.throws(() => ids({ packed: "yes" }), /packed must be a boolean/);
});

test.run();
