// Idempotent replay of a session's last committed turn (docs/http.md, "Retries"). The
// OpenAI and Anthropic SDKs send a request again after a timeout or a 5xx, marked with
// `x-stainless-retry-count` (openai-node src/client.ts, buildHeaders: retryCount =
// maxRetries - retriesRemaining, so 0 on the first attempt, 1 on the first retry). When
// the first attempt had committed before its reply was lost, generating again would roll
// the session back one step and may give the agent another answer; so a retry whose body
// equals the last committed turn's gets that turn's reply again, bytes for bytes (for
// `stream: true` the same events), with no engine call. An identical body without the
// header can be a legitimate repeat (after a context compaction) and is generated as
// before. An `Idempotency-Key` equal to the committed turn's counts as a retry too.
// One reply per session is kept, the last committed one, and only while it is the last:
// any later commit or rollback bumps the trajectory's version and the kept reply is gone.
import { createHash } from "node:crypto";
import type { Trajectory } from "./trajectory.ts";

/** A request body's SHA-256 (in a latin1 string: 32 characters, no Buffer objects): the kept turn holds 32 bytes, not a copy of a body that grows with the history. */
const digest = (body: Buffer): string => createHash("sha256").update(body).digest().toString("latin1");

type Headers = Record<string, string | string[] | undefined>;

interface KeptReply {
  /** The trajectory's version right after the turn committed. */
  version: number;
  /** The committed request body's digest (`digest`). */
  requestDigest: string;
  idempotencyKey?: string;
  /** The reply's headers as JSON: one flat string, not values that keep the engine's whole response head alive. */
  headers: string;
  /** The reply's bytes as it went out, one character each (latin1): see `compact`. */
  bytes: string;
  /** A stream's events: each one's length in `bytes`; undefined for a whole reply. */
  events?: number[];
}

export interface ReplayedReply {
  status: 200;
  headers: Record<string, string>;
  body: Buffer[] | AsyncIterable<Buffer>;
}

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Whether the request says it is a resend of an earlier one (an SDK retry). */
export function retryCount(headers: Headers): number {
  const n = Number(header(headers, "x-stainless-retry-count"));
  return Number.isInteger(n) && n > 0 ? n : 0;
}

export class TurnReplays {
  readonly #kept = new WeakMap<Trajectory, KeptReply>();
  readonly #onReplayed?: () => void;

  /** `onReplayed`: called once per turn answered again (a metric). */
  constructor(onReplayed?: () => void) {
    this.#onReplayed = onReplayed;
  }

  /** The last committed turn's reply for a retry of it; undefined for anything else. Call under the session lock. */
  match(t: Trajectory, request: Buffer, headers: Headers): ReplayedReply | undefined {
    const kept = this.#kept.get(t);
    if (kept === undefined || kept.version !== t.version) return undefined;
    const key = header(headers, "idempotency-key");
    const resend = retryCount(headers) > 0 || (key !== undefined && key === kept.idempotencyKey);
    if (!resend || kept.requestDigest !== digest(request)) return undefined;
    const bytes = Buffer.from(kept.bytes, "latin1");
    const body = kept.events ? eventsOf(bytes, kept.events) : [bytes];
    this.#onReplayed?.();
    return { status: 200, headers: JSON.parse(kept.headers) as Record<string, string>, body };
  }

  /** Keeps a committed turn's reply (`version`: the trajectory's right after the commit; undefined: not committed). */
  keep(
    t: Trajectory,
    version: number | undefined,
    request: { body: Buffer; headers: Headers },
    reply: { headers: Record<string, string>; pieces: Buffer[]; streamed: boolean },
  ): void {
    if (version === undefined || t.version !== version) return; // not committed, or the session moved on already
    const idempotencyKey = header(request.headers, "idempotency-key");
    this.#kept.set(t, {
      version,
      requestDigest: digest(request.body),
      idempotencyKey,
      headers: JSON.stringify(reply.headers),
      bytes: compact(reply.pieces),
      events: reply.streamed ? reply.pieces.map((p) => p.length) : undefined,
    });
  }
}

/**
 * The pieces' bytes as one latin1 string (a byte per character, so any bytes round-trip,
 * and V8 stores it one byte per character). Every session keeps one reply for as long as
 * it lives: a small reply copied by Buffer.concat or Buffer.from lands in Node's shared
 * 8 KiB allocation pool and keeps that whole pool slab alive, 8 KiB per session for a
 * reply of a few hundred bytes (bench/fork-heap.ts showed it: most of what a fork with one
 * turn kept); a Buffer of its own still costs two objects and a native allocation.
 */
function compact(pieces: readonly Buffer[]): string {
  return pieces.length === 1 ? pieces[0]!.toString("latin1") : Buffer.concat(pieces).toString("latin1");
}

async function* eventsOf(bytes: Buffer, lengths: readonly number[]): AsyncGenerator<Buffer> {
  // Fresh copies: whoever writes them may release or reuse what it was given.
  let at = 0;
  for (const n of lengths) {
    yield Buffer.from(bytes.subarray(at, at + n));
    at += n;
  }
}

/** `events` passed on as they are, each also copied; `done(copies)` once all of them went out. */
export async function* keepingEvents(
  events: AsyncIterable<Buffer>,
  done: (pieces: Buffer[]) => unknown,
): AsyncGenerator<Buffer> {
  const pieces: Buffer[] = [];
  for await (const piece of events) {
    pieces.push(Buffer.from(piece));
    yield piece;
  }
  done(pieces);
}
