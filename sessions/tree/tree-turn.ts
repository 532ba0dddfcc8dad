// A chat turn in tree mode (docs/trajectories.md): where it attaches (the deepest node whose
// message path its history matches), the checks before it is sent (node cap, a parent cut
// by `length`), moving the session's linear view onto the parent's path so the prompt is
// planned and verified exactly as a linear turn's (prompt-builder.ts, trajectory.ts), and
// the node it becomes once committed, live or replayed from the journal. Never discards a
// node: a retried or rewritten turn is a sibling branch.
import type { ChatMessage } from "../chat-template.ts";
import { LengthCutNodeError, TrajectoryNodeLimitError } from "../errors.ts";
import type { NodeFields } from "../journal/records.ts";
import type { MessageMatcher } from "../message-compare.ts";
import type { Trajectory, TurnInput } from "../trajectory.ts";
import { nodeIds, TrajectoryTree, type TreeNode } from "./tree.ts";

/** Where a prepared tree-mode turn goes: under `parent` (null: a root), a retry of `retryOf` when set. */
export interface TreePlacement {
  parent: TreeNode | null;
  retryOf: string | null;
}

/** Counts a tree-mode server reports (worker metrics). */
export interface TreeEvents {
  onNode?: () => void;
  /** A node whose parent already had a child (a new branch). */
  onBranch?: () => void;
  onRetry?: () => void;
}

/**
 * Moves the session's linear view onto `node`'s path (null: the empty session). The one
 * place a branch's state is made: it keeps the common prefix with the path held now and
 * re-applies the rest from the nodes (their checkpoints are whole, so nothing is rendered
 * or tokenized again).
 */
export function checkout(t: Trajectory, tree: TrajectoryTree, node: TreeNode | null): void {
  const path = TrajectoryTree.path(node);
  const active = tree.active;
  let keep = 0;
  while (keep < active.length && keep < path.length && active[keep] === path[keep]) keep++;
  t.rollbackTo(keep);
  for (const n of path.slice(keep)) t.restore(turnInputOf(n));
  tree.active = path;
}

function turnInputOf(n: TreeNode): TurnInput {
  return {
    promptIds: n.ids.slice(n.promptLength),
    completionIds: n.ids.slice().slice(n.promptLength),
    messages: n.messages as ChatMessage[],
    tools: n.tools,
    weightVersion: n.weightVersion,
    timestamp: n.timestamp ?? undefined,
  };
}

/** Step 1 of a tree-mode turn, under the lock: place it and hold its parent's path. */
export function placeTurn(
  t: Trajectory,
  tree: TrajectoryTree,
  request: readonly ChatMessage[],
  matcher: MessageMatcher | undefined,
  maxNodes: number,
): TreePlacement {
  if (tree.size >= maxNodes) throw new TrajectoryNodeLimitError(t.id, maxNodes);
  const parent = tree.attachPoint(request, matcher);
  if (parent?.finishReason === "length") throw new LengthCutNodeError(t.id, parent.id);
  const retry = tree.retryTarget(parent, request, matcher);
  checkout(t, tree, parent);
  return { parent, retryOf: retry?.id ?? null };
}

/** Before a tree-mode commit, under the lock: another branch's turn may have moved the view since step 1. */
export function reholdParent(t: Trajectory, tree: TrajectoryTree, place: TreePlacement, maxNodes: number): void {
  if (tree.size >= maxNodes) throw new TrajectoryNodeLimitError(t.id, maxNodes);
  checkout(t, tree, place.parent);
}

/** The record's node fields of the turn about to be committed. */
export function nodeFields(tree: TrajectoryTree, place: TreePlacement, finishReason: string | null): NodeFields {
  return { id: `n${tree.size}`, parent: place.parent?.id ?? null, retryOf: place.retryOf, finishReason };
}

/** After the commit (t.restore of `input`): the node joins the tree and becomes the held path's end. */
export function addNode(
  t: Trajectory,
  tree: TrajectoryTree,
  input: TurnInput,
  node: NodeFields,
  events: TreeEvents = {},
): TreeNode {
  const parent = node.parent === null ? null : tree.get(node.parent)!;
  const siblings = parent === null ? tree.roots : parent.children;
  const branching = siblings.length > 0;
  // t holds the committed turn (t.restore ran): its last checkpoint is this node's.
  const ids = nodeIds(t.idsSnapshot());
  const added = tree.add({
    parent,
    retryOf: node.retryOf,
    messages: input.messages,
    tools: t.lastTools,
    ids,
    promptLength: input.promptIds.length,
    finishReason: node.finishReason,
    weightVersion: input.weightVersion ?? null,
    timestamp: input.timestamp ?? null,
  });
  tree.active = [...TrajectoryTree.path(parent), added];
  events.onNode?.();
  if (branching) events.onBranch?.();
  if (node.retryOf !== null) events.onRetry?.();
  return added;
}

/** A journalled tree-mode turn on replay: the same checkout, restore and node as when it was committed. */
export function replayNode(t: Trajectory, tree: TrajectoryTree, input: TurnInput, node: NodeFields): void {
  if (node.id !== `n${tree.size}`) throw new Error(`journal: node ${node.id} of ${t.id} follows ${tree.size} nodes`);
  const parent = node.parent === null ? null : tree.get(node.parent);
  if (node.parent !== null && parent === undefined)
    throw new Error(`journal: node ${node.id} of ${t.id} names an unknown parent ${node.parent}`);
  checkout(t, tree, parent ?? null);
  t.restore(input);
  addNode(t, tree, input, node);
}
