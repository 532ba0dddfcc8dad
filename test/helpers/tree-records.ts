// Tree-mode records as a test reads them (docs/trajectories.md), and the check that two
// sessions, one driven with streaming and one without, ended as the same tree: node
// shape, ids and logprobs, outline and samples (tree-streaming and tree-anthropic tests).
import * as assert from "uvu/assert";
import { call } from "./server.ts";
import { recordIds, type RawRecord } from "./turn-records.ts";

export interface TreeRecord extends RawRecord {
  node_id: string;
  parent: string | null;
  retry_of: string | null;
  finish_reason: string | null;
}

/** A node's place: id, parent, what it retries, how it ended. */
export const treeShape = (r: TreeRecord) => [r.node_id, r.parent, r.retry_of, r.finish_reason];

/**
 * The tree both tests' `converse` build, on the chat and the Anthropic route alike: a turn
 * (n0), the next (n1) and its retry (n2), a rewritten first message (a new root, n3), another
 * root cut by `length` (n4) and its retry (n5), then a turn under n2 (n6).
 */
export const CONVERSATION_TREE = [
  ["n0", null, null, "stop"],
  ["n1", "n0", null, "stop"],
  ["n2", "n0", "n1", "stop"],
  ["n3", null, null, "stop"],
  ["n4", null, null, "length"],
  ["n5", null, "n4", "stop"],
  ["n6", "n2", null, "stop"],
];

export async function treeRecords(base: string, id: string): Promise<TreeRecord[]> {
  return (await call<{ records: TreeRecord[] }>(base, "GET", `/sessions/${id}`)).json.records;
}

/**
 * Asserts sessions `a` and `b` are the same tree, of shape `shape` (treeShape of each
 * record), with the same ids and logprobs, outline, and samples for each of `sampleBodies`
 * (session ids aside: each names its own session). Returns `a`'s records.
 */
export async function assertSameTrees(
  base: string,
  a: string,
  b: string,
  shape: unknown[][],
  sampleBodies: object[],
): Promise<TreeRecord[]> {
  const [ra, rb] = [await treeRecords(base, a), await treeRecords(base, b)];
  assert.equal(ra.map(treeShape), shape);
  assert.equal(ra.map(treeShape), rb.map(treeShape));
  assert.equal(ra.map(recordIds), rb.map(recordIds), "the same prompt and completion ids and logprobs");
  const outline = async (id: string) => {
    const got = await call<{ nodes: unknown[]; current: string }>(base, "GET", `/sessions/${id}/tree`);
    return { nodes: got.json.nodes, current: got.json.current };
  };
  assert.equal(await outline(a), await outline(b));
  for (const body of sampleBodies) {
    const sample = async (id: string) => {
      const got = await call(base, "POST", `/sessions/${id}/samples`, body);
      assert.is(got.status, 200, got.text);
      return JSON.parse(got.text, (key, value) => (key === "session_id" ? undefined : value));
    };
    assert.equal(await sample(a), await sample(b), JSON.stringify(body));
  }
  return ra;
}
