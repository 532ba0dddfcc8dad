// GET /sessions/{id}/tree (docs/trajectories.md): a session's nodes as a compact outline for
// tools and people: each node's id, parent, the node it retried, its token span (where its
// new tokens start, where its completion starts and ends) and its status (the finish
// reason). A linear session answers its turns as a chain (n<k>'s parent n<k-1>), with
// finish reasons read from its records.
import type { TurnRecord } from "../journal/records.ts";
import { scanReplyFacts } from "../journal/record-scan.ts";
import type { Trajectory } from "../trajectory.ts";

export interface OutlineNode {
  node: string;
  parent: string | null;
  retry_of: string | null;
  /** Token span [start, end) of the node's checkpoint that is new: from its parent's end to its own. */
  span: [number, number];
  completion_start: number;
  status: string | null;
}

export interface Outline {
  session_id: string;
  trajectory: "linear" | "tree";
  /** The node the session's last turn left current (null before any). */
  current: string | null;
  nodes: OutlineNode[];
}

export function outline(t: Trajectory, records: () => Promise<TurnRecord[]>): Promise<Outline> | Outline {
  const tree = t.tree;
  if (tree) {
    const nodes = tree.nodes.map((n) => ({
      node: n.id,
      parent: n.parent?.id ?? null,
      retry_of: n.retryOf,
      span: [Math.min(n.parent?.ids.length ?? 0, n.promptLength), n.ids.length] as [number, number],
      completion_start: n.promptLength,
      status: n.finishReason,
    }));
    return { session_id: t.id, trajectory: "tree", current: tree.active.at(-1)?.id ?? null, nodes };
  }
  return records().then((list) => {
    const c = t.checkpoints;
    const nodes = list.map((record, k) => ({
      node: `n${k}`,
      parent: k === 0 ? null : `n${k - 1}`,
      retry_of: null,
      span: [k === 0 ? 0 : Math.min(c.lengthOf(k - 1), c.promptLengthOf(k)), c.lengthOf(k)] as [number, number],
      completion_start: c.promptLengthOf(k),
      status: scanReplyFacts(record.response, k).finishReason,
    }));
    return { session_id: t.id, trajectory: "linear", current: nodes.at(-1)?.node ?? null, nodes };
  });
}
