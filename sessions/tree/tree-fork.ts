// A fork of a tree-mode session at a node (POST /sessions/{id}/fork {"at": "n<k>"}, issue 43;
// docs/trajectories.md, "Forks"): a new tree-mode session holding the path from a root
// down to that node, as the nodes n0, n1, … of one chain. Its ids are shared copy-on-write
// with the parent's (the parent's linear view is moved onto the path for Trajectory.forkAt,
// then back), its nodes keep the parent nodes' messages and checkpoint views (both
// immutable), so the fork costs O(depth), not O(tokens). A node's `retry_of` names a
// sibling the fork does not hold: the fork's nodes retried nothing. Its records are the
// path's, renumbered the same way (records.ts pathNode).
import type { Trajectory } from "../trajectory.ts";
import { checkout } from "./tree-turn.ts";
import { TrajectoryTree, type TreeNode } from "./tree.ts";

/** Record indexes of the path from a root down to `node` (its nodes' creation order): what a FORK entry keeps. */
export function pathIndexes(node: TreeNode): number[] {
  return TrajectoryTree.path(node).map((n) => n.index);
}

/**
 * The fork `id` of tree-mode session `t` at `node`; `t` holds the same path as before. A
 * node on the path `t` holds now (the latest turn's, usually) forks from it as it is; any
 * other is checked out for the fork and the held path back after, a new version of `t`'s
 * view (a kept reply of its last turn is then not replayed: turn-replay.ts).
 */
export function forkAtNode(t: Trajectory, tree: TrajectoryTree, node: TreeNode, id: string): Trajectory {
  let fork: Trajectory;
  if (tree.active[node.depth - 1] === node) fork = t.forkAt(node.depth - 1, id);
  else {
    const held = tree.active.at(-1) ?? null;
    checkout(t, tree, node);
    fork = t.forkAt(node.depth - 1, id);
    checkout(t, tree, held);
  }
  const chain = new TrajectoryTree();
  let parent: TreeNode | null = null;
  for (const n of TrajectoryTree.path(node)) {
    parent = chain.add({
      parent,
      retryOf: null,
      messages: n.messages,
      tools: n.tools,
      ids: n.ids,
      promptLength: n.promptLength,
      finishReason: n.finishReason,
      weightVersion: n.weightVersion,
      timestamp: n.timestamp,
    });
  }
  chain.active = TrajectoryTree.path(parent);
  fork.tree = chain;
  return fork;
}

/** On replay: the fork a FORK entry with `path` names, checked against the parent's tree as replayed so far. */
export function replayForkAtNode(t: Trajectory, path: readonly number[], id: string): Trajectory {
  const tree = t.tree;
  const node = tree?.nodes[path.at(-1) ?? -1];
  if (!tree || !node || pathIndexes(node).join() !== path.join())
    throw new Error(`journal: fork ${id} of ${t.id} names a path its tree does not have`);
  return forkAtNode(t, tree, node, id);
}
