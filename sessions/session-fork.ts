// POST /sessions/{id}/fork (docs/http.md, issue 43): a new session whose history is the
// parent's path up to and including one committed turn. The ids are shared copy-on-write
// (Trajectory.forkAt, checkpoints.ts) and so are the records (RecordStore.fork; a journal
// writes one small entry), so a fork costs O(turns), not O(tokens), and turns on either side
// never affect the other. It runs under the parent's lock, so it forks the committed state:
// a turn of the parent at the engine meanwhile commits into the parent only. A fork of a
// finished (aborted) session is a new, live session. A fork lives on its parent's shard:
// the router mints its id so that it routes there, and a caller-chosen id must hash there
// too (`owns`). Its routing key (its root session's id, Trajectory.routingKey) is journalled with it.
import {
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
  /** 0-based index of the last committed turn the fork keeps. */
  at: number;
  sessionId?: string;
}

/** The fork body: `{"at": <0-based turn index>, "session_id"?: <id>}`; anything else is a 400. */
export function parseForkRequest(body: Buffer | undefined): ForkRequest {
  let value: unknown;
  try {
    value = JSON.parse(body === undefined || body.length === 0 ? "null" : body.toString("utf8"));
  } catch (err) {
    throw new InvalidForkRequestError(`invalid JSON body: ${(err as Error).message}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new InvalidForkRequestError(`a fork body is {"at": <0-based turn index>, "session_id"?: <id>}`);
  const { at, session_id: sessionId, ...rest } = value as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new InvalidForkRequestError(`unknown fork field ${JSON.stringify(unknown[0])}`);
  if (typeof at !== "number" || !Number.isSafeInteger(at) || at < 0)
    throw new InvalidForkRequestError(
      `"at" must be a 0-based turn index (a non-negative integer), got ${JSON.stringify(at)}`,
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
    // A tree's records are its nodes in creation order, not one path: a turn index names no
    // single history, and the records a fork shares would be the wrong ones.
    if (parent.tree) throw new ForkTreeError(parentId);
    if (request.at >= parent.assistantCount) throw new ForkTurnError(parentId, request.at, parent.assistantCount);
    const made = deps.registry.adopt(parent.forkAt(request.at, id ?? deps.registry.mintId()));
    // Under its own lock until its records exist: a turn on it waits for them.
    await made.lock.run(async () => {
      try {
        await deps.records.fork(parentId, made.id, request.at + 1, made.routingKey);
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

/** The reply header naming the fork's id: the router writes the client's body (with a session token) from it. */
export const FORK_ID_HEADER = "x-tito-session-id";
