// POST /sessions/{id}/fork (docs/http.md, issue 43): a new session whose history is the
// parent's path up to and including one committed turn. The ids are shared copy-on-write
// (Trajectory.forkAt, checkpoints.ts) and so are the records (RecordStore.fork; a journal
// writes one small entry), so a fork costs O(turns), not O(tokens), and turns on either side
// never affect the other. It runs under the parent's lock, so it forks the committed state:
// a turn of the parent at the engine meanwhile commits into the parent only. A fork of a
// finished (aborted) session is a new, live session. A fork lives on its parent's shard:
// the router mints its id so that it routes there, and a caller-chosen id must hash there
// too (`owns`). Its routing key (its root session's id, Trajectory.routingKey) is journalled with it.
// A tree-mode session is forked at a node id instead of a turn index: the fork is a tree-mode
// session holding the path down to that node (sessions/tree/tree-fork.ts).
import {
  ForkNodeError,
  ForkPlacementError,
  ForkTreeError,
  ForkTurnError,
  InvalidForkRequestError,
  SessionNotFoundError,
} from "./errors.ts";
import type { IdleExpiry } from "./idle-expiry.ts";
import type { RecordStore } from "./journal/records.ts";
import { checkSessionId, type SessionRegistry } from "./registry.ts";
import { json, type CoreResponse } from "./core-message.ts";
import type { Trajectory } from "./trajectory.ts";
import { forkAtNode, pathIndexes } from "./tree/tree-fork.ts";

/** Where a fork may live (the worker's shard), and the id the router minted for it. */
export interface ForkPlacement {
  /** The fork's id when the body names none: the router mints one that routes to this shard. */
  mintedId?: string;
  /** Whether this shard owns a caller-chosen id; a fork elsewhere would not be found. Default: every id. */
  owns?: (sessionId: string) => boolean;
  /** Said in the refusal of an id another shard owns (e.g. the worker count). */
  hint?: string;
}

export interface ForkDeps {
  registry: SessionRegistry;
  records: RecordStore;
  idle?: IdleExpiry;
}

export interface ForkRequest {
  /** 0-based index of the last committed turn the fork keeps (linear), or the node it ends at (tree mode: "n<k>"). */
  at: number | string;
  sessionId?: string;
}

/** A node id as a tree-mode session names its nodes (sessions/tree/tree.ts). */
const NODE_ID = /^n(0|[1-9][0-9]{0,15})$/;

/** The fork body: `{"at": <0-based turn index> | <node id>, "session_id"?: <id>}`; anything else is a 400. */
export function parseForkRequest(body: Buffer | undefined): ForkRequest {
  let value: unknown;
  try {
    value = JSON.parse(body === undefined || body.length === 0 ? "null" : body.toString("utf8"));
  } catch (err) {
    throw new InvalidForkRequestError(`invalid JSON body: ${(err as Error).message}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new InvalidForkRequestError(
      `a fork body is {"at": <0-based turn index, or a tree-mode session's node id>, "session_id"?: <id>}`,
    );
  const { at, session_id: sessionId, ...rest } = value as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new InvalidForkRequestError(`unknown fork field ${JSON.stringify(unknown[0])}`);
  const turn = typeof at === "number" && Number.isSafeInteger(at) && at >= 0;
  if (!turn && !(typeof at === "string" && NODE_ID.test(at)))
    throw new InvalidForkRequestError(
      `"at" must be a 0-based turn index (a non-negative integer) or a node id ("n0", "n1", …), got ${JSON.stringify(at)}`,
    );
  if (sessionId !== undefined && typeof sessionId !== "string")
    throw new InvalidForkRequestError(`"session_id" must be a string`);
  return sessionId === undefined ? { at } : { at, sessionId };
}

/** Forks `parentId` as the body asks; 201 `{"session_id"}` (and the id in `x-tito-session-id`, for the router). */
export async function forkSession(
  deps: ForkDeps,
  parentId: string,
  body: Buffer | undefined,
  placement: ForkPlacement = {},
): Promise<CoreResponse> {
  const request = parseForkRequest(body);
  const parent = deps.registry.get(parentId);
  const id = request.sessionId ?? placement.mintedId;
  if (request.sessionId !== undefined) checkSessionId(request.sessionId);
  if (request.sessionId !== undefined && placement.owns && !placement.owns(request.sessionId))
    throw new ForkPlacementError(
      `cannot fork session_id=${parentId} as session_id=${request.sessionId}: a fork lives on its parent's shard and that id routes to another${placement.hint ?? ""}; leave session_id out to have one minted`,
    );
  const fork = await parent.lock.run(async () => {
    if (parent.closing) throw new SessionNotFoundError(parentId, deps.registry.notFoundHint);
    const { fork, count, path } = forkOf(parent, request.at, id ?? deps.registry.mintId());
    const made = deps.registry.adopt(fork);
    // Under its own lock until its records exist: a turn on it waits for them.
    await made.lock.run(async () => {
      try {
        await deps.records.fork(parentId, made.id, count, made.routingKey, path);
      } catch (err) {
        deps.registry.forget(made.id); // not acknowledged: the fork does not exist
        throw err;
      }
    });
    return made;
  });
  deps.idle?.touch(fork.id);
  deps.idle?.touch(parentId);
  const res = json(201, { session_id: fork.id });
  res.headers[FORK_ID_HEADER] = fork.id;
  return res;
}

/**
 * The fork of `parent` at `at` (not yet registered), the records it holds: a linear
 * session's first `count`, or a tree-mode session's `path` (its node's, root first). A
 * tree's records are its nodes in creation order, not one path: a turn index names no single
 * history there, and a linear session has no node ids.
 */
function forkOf(parent: Trajectory, at: number | string, id: string) {
  const tree = parent.tree;
  if (tree) {
    if (typeof at === "number") throw new ForkTreeError(parent.id);
    const node = tree.get(at);
    if (!node) throw new ForkNodeError(parent.id, at, tree.size);
    const path = pathIndexes(node);
    return { fork: forkAtNode(parent, tree, node, id), count: path.length, path };
  }
  if (typeof at === "string") throw new ForkNodeError(parent.id, at, undefined);
  if (at >= parent.assistantCount) throw new ForkTurnError(parent.id, at, parent.assistantCount);
  return { fork: parent.forkAt(at, id), count: at + 1, path: undefined };
}

/** The reply header naming the fork's id: the router writes the client's body (with a session token) from it. */
export const FORK_ID_HEADER = "x-tito-session-id";
