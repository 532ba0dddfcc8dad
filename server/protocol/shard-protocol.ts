// The router↔worker protocol: which shard owns a session (the router routes by it, and a
// journal re-shard places sessions by it), every op the router sends a worker, with the
// metadata its request frame carries, and the metadata of the worker's reply. Both sides
// import this file, so an op is named and shaped in one place. Body bytes travel as the frame body and
// are never described here: the router imports this file and never parses a body. It must
// import nothing but transport types (no sessions/, no engine/, no tokenizer).
import type { Channel, IncomingBody, Meta, OutBody } from "../../transport/index.ts";
import type { CancelSignal } from "../../buffers/cancel.ts";

const TWO_32 = 4294967296;

/**
 * FNV-1a 64 over the id's UTF-8 bytes as [high 32 bits, low 32 bits]. Fixed and unsalted,
 * so every process (and every restart) agrees forever. Computed in two 32-bit halves: it
 * runs on every routed request, and BigInt is slower.
 */
function fnv1a64(text: string): [number, number] {
  let hi = 0xcbf29ce4;
  let lo = 0x84222325;
  const bytes = Buffer.from(text, "utf8");
  for (let i = 0; i < bytes.length; i++) {
    lo = (lo ^ bytes[i]!) >>> 0;
    // (hi·2^32 + lo) · (2^40 + 0x1b3) mod 2^64
    const low = lo * 0x1b3;
    const carry = Math.floor(low / TWO_32);
    hi = (Math.imul(hi, 0x1b3) + (lo << 8) + carry) >>> 0;
    lo = low >>> 0;
  }
  return [hi, lo];
}

/** The shard that owns a session among `workers`: FNV-1a 64 of its id, modulo the count. */
export function shardOf(sessionId: string, workers: number): number {
  const [hi, lo] = fnv1a64(sessionId);
  return ((hi % workers) * (TWO_32 % workers) + (lo % workers)) % workers;
}

/** The client's request headers as Node parsed them (lower-case names). */
export type ShardHeaders = Record<string, string | string[] | undefined>;

/** An op on one session that needs nothing but its id (create: the id the router minted). */
type SessionOp<O extends string> = { op: O; sessionId: string };

/** An op that hands the client's HTTP request to the session core; the body is the frame body. */
type ForwardOp<O extends string> = SessionOp<O> & {
  method: string;
  /** The rest of the URL path after /sessions/{id}, in the client's own encoding. */
  path: string;
  /** The raw query string without "?", "" if none. */
  query: string;
  headers: ShardHeaders;
};

/** One request frame's metadata, discriminated by `op`. */
export type ShardRequest =
  | SessionOp<"create">
  | GetOp
  | SessionOp<"delete">
  // GET /sessions/{id}/tree: the session's nodes as an outline (sessions/tree/tree-outline.ts).
  | SessionOp<"tree">
  | ChatOp
  | ForwardOp<"samples">
  | ForwardOp<"proxy">
  | { op: "health" }
  // gc: run a full GC first, so the memory series are what is live (GET /metrics?gc=1).
  | { op: "metrics"; gc?: boolean }
  // A pause with in_flight "abort": every chat turn in flight on the worker aborts its
  // engine request and answers a retryable 503 unless it already committed.
  | { op: "abort-turns" }
  // The rollout door's state (docs/rl-loop.md), sent to every worker on pause and resume: a
  // turn the engine aborted waits while it is paused (mode keep or abort) before it resumes
  // (--on-engine-abort resume; server/worker/worker-door.ts).
  | DoorOp
  // POST /sessions/{id}/abort: the session is finished (no more turns) and its chat turns in
  // flight abort their engine requests and answer a retryable 503 unless already committed.
  | SessionOp<"abort-session">
  | ForkOp
  | ListOp;

/**
 * POST /sessions/{id}/fork (the body, `{"at", "session_id"?}`, is the frame body; the
 * worker parses it). A fork lives on its parent's shard (sessions/session-fork.ts):
 * `forkId` is an id the router minted that routes there, used when the body names none;
 * `shard` of `workers` is where the router sent it, so the worker can refuse a
 * caller-chosen id that routes elsewhere.
 */
export type ForkOp = SessionOp<"fork"> & { forkId: string; shard: number; workers: number };

/**
 * The records of a session (GET /sessions/{id}). `handoff`: the router's ticket when it can
 * hand the client's socket to the worker (docs/architecture.md, "The records handoff"): the
 * worker keeps a 200 response under the ticket and replies without its body, `handoff: true`.
 */
export type GetOp = SessionOp<"get"> & { handoff?: string };

/** The door's state: `mode` is the pause's in_flight mode (null while running). */
export type DoorOp = { op: "door"; paused: boolean; mode: string | null; weightVersion: string | null };

/**
 * A chat turn. `weightVersion`: the policy version current when the router sent it (the
 * rollout door; null before the first resume), kept in the turn's record. A router from
 * before weight versions leaves it out.
 */
export type ChatOp = ForwardOp<"chat"> & { weightVersion?: string | null };

/**
 * One page of a shard's session ids: up to `limit` ids greater than `after` ("" = from the
 * start), in id order. `detail`: each session as a summary object instead of its id
 * (GET /sessions?detail=1, the viewer's list; sessions/session-summary.ts). `prefix`: only
 * ids that start with it (the viewer's filter).
 */
export type ListOp = { op: "list"; after: string; limit: number; detail?: boolean; prefix?: string };

/** A session in a detailed page: its id and the facts of sessions/session-summary.ts. */
export type ListedSession = { session_id: string };

/** The body of a list reply (JSON): the page, and whether the shard has more ids after it. */
export interface ListPage {
  sessions: string[] | ListedSession[];
  more: boolean;
}

export type ShardOp = ShardRequest["op"];

/**
 * Every op's reply metadata: the HTTP status and headers the router relays to the client
 * unchanged (never framing headers). A failed op is a transport error frame instead.
 * `handoff`: a get with a ticket whose response the worker kept, to write it to the
 * client's socket itself once the router hands that over; the reply has no body.
 */
export type ShardReply = { status: number; headers: Record<string, string>; handoff?: boolean };

/** A reply as the router reads it: typed metadata, and the body still streaming in. */
export interface ShardResponse extends ShardReply {
  body: IncomingBody;
  handoff: boolean;
}

// Which fields each op carries, derived from the union so that this table (what the worker
// checks at run time) cannot disagree with it: a missing, extra or misfiled op fails the typecheck.
type ShapeOf<R> = R extends { method: string }
  ? "forward"
  : R extends { sessionId: string }
    ? "session"
    : R extends { limit: number }
      ? "page"
      : "bare";
const SHAPES: { [O in ShardOp]: ShapeOf<Extract<ShardRequest, { op: O }>> } = {
  create: "session",
  get: "session",
  delete: "session",
  tree: "session",
  chat: "forward",
  samples: "forward",
  proxy: "forward",
  health: "bare",
  metrics: "bare",
  "abort-turns": "bare",
  door: "bare",
  "abort-session": "session",
  fork: "session",
  list: "page",
};

/** Sends one op to a shard; resolves when the reply's header arrives. */
export async function requestShard(
  channel: Channel,
  request: ShardRequest,
  body?: OutBody,
  signal?: CancelSignal,
): Promise<ShardResponse> {
  const res = await channel.request(request, body, { signal });
  // The worker always sends both; a reply without a status is relayed as a bad gateway.
  const headers = res.meta.headers;
  return {
    status: Number(res.meta.status) || 502,
    headers: isObject(headers) ? (headers as Record<string, string>) : {},
    body: res.body,
    handoff: res.meta.handoff === true,
  };
}

/**
 * Reads a request frame's metadata back as a ShardRequest, or says why it cannot: an op
 * this side does not know, or a field missing or of the wrong type (a bug, or a router and
 * a worker from different versions). The reason is for a coded error, never a crash.
 */
export function readShardRequest(meta: Meta): { ok: true; request: ShardRequest } | { ok: false; problem: string } {
  const op = meta.op;
  if (typeof op !== "string") return { ok: false, problem: "no op" };
  if (!Object.hasOwn(SHAPES, op)) return { ok: false, problem: `unknown op "${op}"` };
  const shape = SHAPES[op as ShardOp];
  const wrong =
    shape === "bare"
      ? undefined
      : shape === "session"
        ? notString(meta, "sessionId")
        : shape === "page"
          ? (notString(meta, "after") ??
            (Number.isInteger(meta.limit) && (meta.limit as number) > 0 ? undefined : "limit"))
          : (notString(meta, "sessionId", "method", "path", "query") ??
            (isObject(meta.headers) ? undefined : "headers"));
  if (wrong !== undefined) return { ok: false, problem: `op "${op}" without a valid ${wrong}` };
  if (op === "list" && meta.detail !== undefined && typeof meta.detail !== "boolean")
    return { ok: false, problem: `op "list" with a detail that is not a boolean` };
  if (op === "list" && meta.prefix !== undefined && typeof meta.prefix !== "string")
    return { ok: false, problem: `op "list" with a prefix that is not a string` };
  if (op === "get" && meta.handoff !== undefined && typeof meta.handoff !== "string")
    return { ok: false, problem: `op "get" with a handoff that is not a string` };
  if (op === "fork" && (typeof meta.forkId !== "string" || !isCount(meta.shard) || !isCount(meta.workers)))
    return { ok: false, problem: `op "fork" without a valid forkId, shard and workers` };
  const version = meta.weightVersion;
  if (op === "chat" && version !== undefined && version !== null && typeof version !== "string")
    return { ok: false, problem: `op "chat" with a weightVersion that is not a string` };
  if (op === "door" && (typeof meta.paused !== "boolean" || (version !== null && typeof version !== "string")))
    return { ok: false, problem: `op "door" without a paused flag and a weightVersion` };
  return { ok: true, request: meta as ShardRequest };
}

const isCount = (value: unknown) => Number.isInteger(value) && (value as number) >= 0;

function notString(meta: Meta, ...fields: string[]): string | undefined {
  return fields.find((field) => typeof meta[field] !== "string");
}

function isObject(value: unknown): value is object {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
