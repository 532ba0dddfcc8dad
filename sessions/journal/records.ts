// The record store seam (one record per committed turn), the in-memory store, and the
// GET body's JSON around the records. Records keep the request sent upstream and the
// engine's reply exactly as the bytes that crossed the wire; the GET body splices those
// bytes into the JSON as they are, as chunks (or a stream, for the journal store), so no
// record is ever re-parsed or re-serialized and no session body has to fit in one string.
import type { SessionBudget } from "../budget.ts";
import assert from "node:assert";
import type { ChatMessage } from "../chat-template.ts";
import type { ResumedTurn } from "../engine-port.ts";

/** A resumed turn as its record keeps it (docs/rl-loop.md, "Partial rollouts"); `tokens`: the whole completion's. */
export type ResumedRecord = ResumedTurn & { tokens: number };

export interface TurnRecord {
  /** Unix seconds (float). */
  timestamp: number;
  method: string;
  path: string;
  statusCode: number;
  /**
   * The JSON body sent upstream (with input_ids): one Buffer, or the parts it was sent in,
   * in order (engine/request-body.ts), which a journal writes as they are.
   */
  request: Buffer | readonly Buffer[];
  /** The engine's full reply body, R3 payloads included, as the chunks it arrived in. */
  response: readonly Buffer[];
  /** CRC-32 of the response bytes, when known (a journal then need not read them again). */
  responseCrc?: number;
  /** The policy version current when the router sent the turn (docs/rl-loop.md); null or absent: none was set. */
  weightVersion?: string | null;
  /** The engine's own `meta_info.weight_version`, when its reply carried one. */
  engineWeightVersion?: string;
  /** Set on a turn the engine aborted and that was continued: then `request`/`response` are its last exchange. */
  resumed?: ResumedRecord;
  /** Where the turn sits in a tree-mode session (sessions/tree/tree.ts); absent in linear mode. */
  node?: NodeFields;
}

/** A tree-mode record's node: its id, its parent's ("null": a first turn), the node it retried, its finish reason. */
export interface NodeFields {
  id: string;
  parent: string | null;
  retryOf: string | null;
  finishReason: string | null;
}

/**
 * The node fields of the `i`-th record of a fork at a tree-mode node (RecordStore.fork's
 * `path`): its nodes are one chain renumbered from n0, so a node's id is still its record's
 * index; it retried nothing the fork holds; its finish reason is the original node's.
 */
export function pathNode(node: NodeFields | undefined, i: number): NodeFields {
  assert.ok(node, "a fork at a node holds tree-mode records only");
  return { id: `n${i}`, parent: i === 0 ? null : `n${i - 1}`, retryOf: null, finishReason: node.finishReason };
}

/** Why a session was deleted: by a client (DELETE), or for being idle (--session-idle-ttl-s). */
export type DeleteReason = "expired";

/**
 * What a journal needs, besides the record, to rebuild a committed turn on replay. A chat
 * API record's request carries the messages, tools and prompt ids; a token-level API's
 * request carries only the ids, so its turn keeps the conversation here.
 */
export interface TurnState {
  /** Committed turns before this one. */
  index: number;
  completionIds: readonly number[];
  assistant: ChatMessage;
  /** The prompt's messages and tools, when the request sent upstream does not carry them. */
  conversation?: { messages: readonly ChatMessage[]; tools?: readonly unknown[] };
  /** "messages" when the turn came through the Anthropic Messages API; absent for chat. */
  clientApi?: "messages";
}

/** A committed turn read back from a journal, with the request it was sent with. */
export interface ReplayedTurn extends TurnState {
  request: Buffer;
  /** The record's commit time and weight version (the session listing shows them). */
  timestamp?: number;
  weightVersion?: string;
  /** Its node, in a tree-mode session. */
  node?: NodeFields;
  /** A resumed turn's parts: `request` then holds its prompt followed by their ids. */
  resumed?: ResumedRecord;
}

/** Receives a journal's history in order; only sessions alive at some point are named. */
/** What a session was created with, kept in its CREATE entry (journal-format.ts). */
export interface SessionMeta {
  budget?: SessionBudget;
  trajectory?: "tree";
  /** Its routing key when not its own id: a fork written out whole by a re-shard (reshard-forks.ts) keeps its root's. */
  routingKey?: string;
}

export interface ReplayVisitor {
  /** `meta`: its budget (when it had one), `trajectory` "tree" for a tree-mode session (absent: linear), its routing key when not its id. */
  created(sessionId: string, meta?: SessionMeta): void;
  /** The session was aborted: it takes no more turns. */
  finished?(sessionId: string): void;
  committed(sessionId: string, turn: ReplayedTurn): void;
  truncated(sessionId: string, count: number): void;
  /**
   * `sessionId` was forked from `parentId`'s first `count` turns (RecordStore.fork), or, with
   * `path`, from the tree-mode nodes of those record indexes (a root-to-node path).
   */
  forked(sessionId: string, parentId: string, count: number, path?: readonly number[]): void;
  /** `reason` is absent for a client's DELETE (and in journals from before expiry). */
  deleted(sessionId: string, reason?: DeleteReason): void;
}

/**
 * Where committed turns' records live: in memory, or a journal on disk. Every change
 * resolves once the store holds it (for the journal: written), and a rejected change left
 * nothing behind. Callers serialize changes per session (the session lock).
 */
export interface RecordStore {
  /** Whether append() keeps the reply's buffers themselves (then they must never be reused). */
  readonly retainsReplyBuffers: boolean;
  /** Rebuilds what the store holds from before this process (nothing, for memory). */
  recover(visitor: ReplayVisitor): Promise<void>;
  /** A new session, its budget and trajectory mode (kept, so a restart keeps them). */
  open(sessionId: string, meta?: SessionMeta): Promise<void>;
  /** The session takes no more turns (kept, so a restart keeps it). */
  finish(sessionId: string): Promise<void>;
  append(sessionId: string, record: TurnRecord, turn: TurnState): Promise<void>;
  /** Keeps the first `count` records (a rollback). */
  truncate(sessionId: string, count: number): Promise<void>;
  drop(sessionId: string, reason?: DeleteReason): Promise<void>;
  /**
   * Opens `sessionId` holding the first `count` records of `parentId` (a fork, issue 43),
   * shared, not copied: later changes of either never show in the other. `routingKey`: the
   * fork's (its root session's id; a journal keeps it). With `path` (a tree-mode parent's
   * record indexes from a root down to a node; `count` is its length), the fork holds those
   * records instead, as the nodes n0, n1, … of one chain (pathNode).
   */
  fork(parentId: string, sessionId: string, count: number, routingKey: string, path?: readonly number[]): Promise<void>;
  /** Every record read back whole (training samples); a journal reads them from disk. */
  list(sessionId: string): Promise<TurnRecord[]>;
  /** `head`, the records as JSON array members, then `tail`: as of now, later changes unseen. */
  body(sessionId: string, head: Buffer, tail: Buffer): Buffer[] | AsyncIterable<Buffer>;
  close(): Promise<void>;
}

export class MemoryRecordStore implements RecordStore {
  readonly retainsReplyBuffers = true;
  readonly #bySession = new Map<string, TurnRecord[]>();

  async recover(): Promise<void> {}
  async open(sessionId: string): Promise<void> {
    assert.ok(!this.#bySession.has(sessionId), `records of ${sessionId} opened twice`);
    this.#bySession.set(sessionId, []);
  }
  async append(sessionId: string, record: TurnRecord): Promise<void> {
    // Kept for the session's life: one Buffer of its own, not parts that are views of larger
    // buffers (the client's body, the prompt's ids written with room to spare).
    this.#records(sessionId).push(
      Buffer.isBuffer(record.request) ? record : { ...record, request: requestBytes(record) },
    );
  }
  async finish(): Promise<void> {}
  async truncate(sessionId: string, count: number): Promise<void> {
    const records = this.#records(sessionId);
    if (records.length > count) records.length = count;
  }
  async drop(sessionId: string): Promise<void> {
    this.#bySession.delete(sessionId);
  }
  async fork(
    parentId: string,
    sessionId: string,
    count: number,
    _key: string,
    path?: readonly number[],
  ): Promise<void> {
    assert.ok(!this.#bySession.has(sessionId), `records of ${sessionId} opened twice`);
    const records = this.#records(parentId);
    this.#bySession.set(
      sessionId,
      path
        ? path.map((index, i) => ({ ...records[index]!, node: pathNode(records[index]!.node, i) }))
        : records.slice(0, count),
    );
  }
  async list(sessionId: string): Promise<TurnRecord[]> {
    return [...this.#records(sessionId)];
  }
  body(sessionId: string, head: Buffer, tail: Buffer): Buffer[] {
    const chunks: Buffer[] = [head];
    this.#records(sessionId).forEach((record, i) => {
      if (i > 0) chunks.push(COMMA);
      for (const c of recordChunks(record)) chunks.push(c);
    });
    chunks.push(tail);
    return chunks;
  }
  async close(): Promise<void> {}
  #records(sessionId: string): TurnRecord[] {
    const records = this.#bySession.get(sessionId);
    assert.ok(records, `no records open for session ${sessionId}`);
    return records;
  }
}

const COMMA = Buffer.from(",");

/** The fields of a record besides its request and response bytes. */
export type RecordFields = Pick<
  TurnRecord,
  "timestamp" | "method" | "path" | "statusCode" | "weightVersion" | "engineWeightVersion" | "node" | "resumed"
>;

/** A record's JSON up to its request bytes; `recordMiddle` goes between request and response. */
export function recordHead(record: RecordFields): Buffer {
  const engine =
    record.engineWeightVersion === undefined
      ? ""
      : `"engine_weight_version":${JSON.stringify(record.engineWeightVersion)},`;
  const node = record.node;
  // Tree mode only: a linear session's records are as they always were.
  const tree =
    node === undefined
      ? ""
      : `"node_id":${JSON.stringify(node.id)},"parent":${JSON.stringify(node.parent)},` +
        `"retry_of":${JSON.stringify(node.retryOf)},"finish_reason":${JSON.stringify(node.finishReason)},`;
  return Buffer.from(
    `{${tree}"timestamp":${JSON.stringify(record.timestamp)},"method":${JSON.stringify(record.method)},` +
      `"path":${JSON.stringify(record.path)},"status_code":${record.statusCode},` +
      `"weight_version":${JSON.stringify(record.weightVersion ?? null)},${engine}${resumedJson(record.resumed)}"request":`,
  );
}

/** The runs of policy versions over a resumed turn's completion, oldest first: [version, tokens]. */
export function versionRuns(resumed: ResumedRecord): Array<[string | null, number]> {
  const runs: Array<[string | null, number]> = [];
  let left = resumed.tokens;
  const add = (version: string | null, n: number) => {
    const last = runs.at(-1);
    if (last && last[0] === version) last[1] += n;
    else if (n > 0) runs.push([version, n]);
  };
  for (const part of resumed.parts) {
    add(part.weightVersion, part.completionIds.length);
    left -= part.completionIds.length;
  }
  add(resumed.weightVersion, left);
  return runs;
}

/** A resumed record's members (docs/http.md, records): its parts, version runs, min and max version. */
function resumedJson(resumed: ResumedRecord | undefined): string {
  if (resumed === undefined) return "";
  const runs = versionRuns(resumed);
  const parts = resumed.parts.map((p) => ({
    weight_version: p.weightVersion,
    completion_ids: p.completionIds,
    logprobs: p.logprobs,
  }));
  return (
    `"min_weight_version":${JSON.stringify(runs[0]?.[0] ?? null)},` +
    `"max_weight_version":${JSON.stringify(runs.at(-1)?.[0] ?? null)},` +
    `"weight_versions":${JSON.stringify(runs.map(([v, n]) => ({ weight_version: v, tokens: n })))},` +
    `"resumed":${JSON.stringify(parts)},`
  );
}
export const recordMiddle = Buffer.from(',"response":');
export const recordEnd = Buffer.from("}");
export const recordSeparator = COMMA;

/** A record's request as a list of its parts. */
export function requestParts(record: Pick<TurnRecord, "request">): readonly Buffer[] {
  return Buffer.isBuffer(record.request) ? [record.request] : record.request;
}

/** A record's request as one Buffer (joined when it is in parts). */
export function requestBytes(record: Pick<TurnRecord, "request">): Buffer {
  return Buffer.isBuffer(record.request) ? record.request : Buffer.concat(record.request);
}

/** The chunks of one record's JSON object; the request and response bytes are spliced in. */
export function recordChunks(record: TurnRecord): Buffer[] {
  return [recordHead(record), ...requestParts(record), recordMiddle, ...record.response, recordEnd];
}

/**
 * A records body's `content-length`, known before a byte is read (a journal stream's
 * `byteLength`): a relayed body promises it, so a client of any HTTP version tells a cut
 * body from a whole one (docs/http.md, "GET /sessions/{id}").
 */
export function lengthHeader(body: Buffer[] | (AsyncIterable<Buffer> & { byteLength?: number })): {
  "content-length"?: string;
} {
  const length = Array.isArray(body) ? body.reduce((n, b) => n + b.length, 0) : body.byteLength;
  return length === undefined ? {} : { "content-length": String(length) };
}

/** `{"session_id":…,"records":[` and `],"metadata":{…}}`: what a GET body wraps around the records. */
export function sessionBodyEnds(sessionId: string, metadata: Record<string, unknown>): { head: Buffer; tail: Buffer } {
  return {
    head: Buffer.from(`{"session_id":${JSON.stringify(sessionId)},"records":[`),
    tail: Buffer.from(`],"metadata":${JSON.stringify(metadata)}}`),
  };
}
