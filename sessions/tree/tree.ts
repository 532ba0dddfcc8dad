// The trajectory tree of one session in tree mode (docs/trajectories.md): every committed
// turn is a node whose parent is the turn its history extended (none: a first turn), so a
// retried or rewritten turn becomes a sibling branch instead of rolling the session back.
// A node keeps what a linear trajectory needs to hold its path again (its messages, tools
// and checkpoint ids) plus what samples and the outline report (finish reason, weight
// version, which node it retried). Node ids are "n<k>", k the creation order, which is
// also the index of the node's record. It knows no records, engine or lock: tree-turn.ts
// moves the session's linear view (trajectory.ts) onto a node's path.
import type { ChatMessage } from "../chat-template.ts";
import type { CheckpointView } from "../checkpoints.ts";
import { messagesMatch, type MessageMatcher } from "../message-compare.ts";

export type TrajectoryMode = "linear" | "tree";
export const TRAJECTORY_MODES: readonly TrajectoryMode[] = ["linear", "tree"];
/** `--max-trajectory-nodes` by default. */
export const DEFAULT_MAX_TRAJECTORY_NODES = 1024;

export interface TreeNode {
  readonly id: string;
  /** Creation order: the node's record is the session's record `index`. */
  readonly index: number;
  readonly parent: TreeNode | null;
  /** The sibling it retried (same history), when it is a retry. */
  readonly retryOf: string | null;
  /** Turns on its path, itself included. */
  readonly depth: number;
  /** The conversation right after the turn (its assistant message last). */
  readonly messages: readonly ChatMessage[];
  readonly tools?: unknown[];
  /** Its checkpoint: prompt ids then completion ids. */
  readonly ids: NodeIds;
  readonly promptLength: number;
  readonly finishReason: string | null;
  readonly weightVersion: string | null;
  readonly timestamp: number | null;
  readonly children: TreeNode[];
}

/** A node's checkpoint, read from a store that may share its chunks with others (nodeIds). */
export interface NodeIds {
  readonly length: number;
  at(i: number): number;
  /** Its first `end` ids (all by default), as a new array. */
  slice(end?: number): number[];
}

/**
 * The last checkpoint of `view` as a node's ids. `view` is a copy-on-write snapshot of the
 * session's store (Trajectory.idsSnapshot), so a node costs its marks and at most one chunk
 * of ids, not a copy of its whole path's tokens (which grew with depth × context).
 */
export function nodeIds(view: CheckpointView): NodeIds {
  const k = view.count - 1;
  return { length: view.lengthOf(k), at: (i) => view.idAt(k, i), slice: (end) => view.ids(k, end) };
}

export type NodeInput = Omit<TreeNode, "id" | "index" | "depth" | "children">;

export class TrajectoryTree {
  readonly nodes: TreeNode[] = [];
  readonly roots: TreeNode[] = [];
  /** The path the session's linear view holds now (tree-turn.ts checkout). */
  active: TreeNode[] = [];
  readonly #byId = new Map<string, TreeNode>();

  get size(): number {
    return this.nodes.length;
  }

  get(id: string): TreeNode | undefined {
    return this.#byId.get(id);
  }

  /**
   * The deepest node whose whole message path the request's history matches (the latest
   * of equals), or null (the request shares no committed turn: a new first turn). Walks
   * down from the roots comparing only the messages each child adds to its parent's.
   */
  attachPoint(request: readonly ChatMessage[], matcher?: MessageMatcher): TreeNode | null {
    let best: TreeNode | null = null;
    const visit = (children: readonly TreeNode[], from: number) => {
      for (const child of children) {
        const n = child.messages.length;
        if (n > request.length) continue;
        let i = from;
        while (i < n && messagesMatch(child.messages[i]!, request[i]!, matcher)) i++;
        if (i < n) continue;
        if (best === null || child.depth > best.depth || (child.depth === best.depth && child.index > best.index))
          best = child;
        visit(child.children, n);
      }
    };
    visit(this.roots, 0);
    return best;
  }

  /** The latest child of `parent` whose history is exactly the request's (then the new turn retries it). */
  retryTarget(parent: TreeNode | null, request: readonly ChatMessage[], matcher?: MessageMatcher): TreeNode | null {
    const from = parent?.messages.length ?? 0;
    let found: TreeNode | null = null;
    for (const child of parent?.children ?? this.roots) {
      if (child.messages.length - 1 !== request.length) continue;
      let i = from;
      while (i < request.length && messagesMatch(child.messages[i]!, request[i]!, matcher)) i++;
      if (i === request.length && (found === null || child.index > found.index)) found = child;
    }
    return found;
  }

  add(input: NodeInput): TreeNode {
    const index = this.nodes.length;
    const node: TreeNode = { ...input, id: `n${index}`, index, depth: (input.parent?.depth ?? 0) + 1, children: [] };
    this.nodes.push(node);
    this.#byId.set(node.id, node);
    (input.parent?.children ?? this.roots).push(node);
    return node;
  }

  /** The nodes from a root down to `node`, both included (empty for null). */
  static path(node: TreeNode | null): TreeNode[] {
    const out: TreeNode[] = [];
    for (let n = node; n !== null; n = n.parent) out.push(n);
    return out.reverse();
  }

  /** Nodes without children, in creation order. */
  leaves(): TreeNode[] {
    return this.nodes.filter((n) => n.children.length === 0);
  }

  /** Ids of the nodes a later node retried. */
  superseded(): Set<string> {
    return new Set(this.nodes.flatMap((n) => (n.retryOf === null ? [] : [n.retryOf])));
  }
}
