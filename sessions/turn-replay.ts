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
// A reply still kept PACK_AFTER_MS after its turn (the session idle: a rollout's next turn
// comes sooner and replaces it, uncompressed) is deflated against a dictionary of the
// replies' common text, to about a third of its size (a ~1 KiB chat reply: ~350 bytes):
// issue 43, where every branch of a 64-way fork keeps its own reply.
import { createHash } from "node:crypto";
import { deflateRawSync, inflateRawSync } from "node:zlib";
import type { Trajectory } from "./trajectory.ts";

/** A request body's SHA-256 (in a latin1 string: 32 characters, no Buffer objects): the kept turn holds 32 bytes, not a copy of a body that grows with the history. */
const digest = (body: Buffer): string => createHash("sha256").update(body).digest().toString("latin1");

/** How long a kept reply stays as it went out before it is packed (deflated). */
export const PACK_AFTER_MS = 250;

/**
 * What replies have in common (the wire shapes of the chat, completions and Anthropic
 * APIs, SGLang's meta_info, vLLM's fields, SSE framing, response headers), zlib's preset
 * dictionary for packing them: a short reply is mostly these words. Only this process reads
 * what it packs, so the text may change from one release to the next.
 */
const DICTIONARY = Buffer.from(
  [
    '{"content-type":"text/event-stream","cache-control":"no-cache","connection":"keep-alive"}',
    'data: {"id":"chatcmpl-","object":"chat.completion.chunk","created":,"model":"","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n',
    'data: [DONE]\n\nevent: message_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}',
    '{"id":"msg_","type":"message","role":"assistant","content":[{"type":"text","text":""}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":,"output_tokens":}}',
    '{"id":"cmpl-","object":"text_completion","created":,"model":"","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length","stop_reason":null,"prompt_logprobs":null,"token_ids":[',
    '"tool_calls":[{"id":"call_","type":"function","function":{"name":"","arguments":"{\\""}}],"reasoning_content":null,',
    '"meta_info":{"id":"","finish_reason":{"type":"stop","matched":},"prompt_tokens":,"completion_tokens":,"cached_tokens":0,"weight_version":"default","e2e_latency":0.,"output_token_logprobs":[[-0.,],[-1.,],[-2.,],',
    '"logprobs":{"content":[{"token":"","logprob":-0.,"bytes":[],"top_logprobs":[]}]},"matched_stop":',
    '"usage":{"prompt_tokens":,"completion_tokens":,"total_tokens":,"prompt_tokens_details":null,"reasoning_tokens":0}}',
    '{"content-type":"application/json","content-length":"","date":"","x-request-id":""}',
    '{"id":"chatcmpl-","object":"chat.completion","created":1,"model":"","choices":[{"index":0,"message":{"role":"assistant","content":"',
    '"},"logprobs":null,"finish_reason":"stop",',
  ].join(""),
  "utf8",
);

type Headers = Record<string, string | string[] | undefined>;

interface KeptReply {
  /** The trajectory's version right after the turn committed. */
  version: number;
  /** The committed request body's digest (`digest`). */
  requestDigest: string;
  idempotencyKey?: string;
  /** The reply's headers as JSON: one flat string, not values that keep the engine's whole response head alive (undefined once packed). */
  headers: string | undefined;
  /**
   * The reply's bytes as it went out, one character each (latin1): see `compact`. Once
   * packed: the headers' JSON (UTF-8), a newline, and the bytes, deflated (latin1 too).
   */
  bytes: string;
  /** When it was kept (performance.now()). */
  at: number;
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
  readonly #packAfterMs: number;
  /**
   * The sessions whose replies were kept and not packed yet, oldest first, with when. Not the
   * replies: a reply replaced by the next turn a few ms later must die young, as before
   * packing; held here 250 ms it outlived the young generation, and the worker's old space
   * filled with them between major GCs (bench small, 1 worker: peak RSS +23 MiB).
   */
  #young: Trajectory[] = [];
  #youngAt: number[] = [];
  #timer: NodeJS.Timeout | undefined;

  /** `onReplayed`: called once per turn answered again (a metric); `packAfterMs`: PACK_AFTER_MS unless a test says. */
  constructor(onReplayed?: () => void, packAfterMs = PACK_AFTER_MS) {
    this.#onReplayed = onReplayed;
    this.#packAfterMs = packAfterMs;
  }

  /** The last committed turn's reply for a retry of it; undefined for anything else. Call under the session lock. */
  match(t: Trajectory, request: Buffer, headers: Headers): ReplayedReply | undefined {
    const kept = this.#kept.get(t);
    if (kept === undefined || kept.version !== t.version) return undefined;
    const key = header(headers, "idempotency-key");
    const resend = retryCount(headers) > 0 || (key !== undefined && key === kept.idempotencyKey);
    if (!resend || kept.requestDigest !== digest(request)) return undefined;
    const reply = unpack(kept);
    const body = kept.events ? eventsOf(reply.bytes, kept.events) : [reply.bytes];
    this.#onReplayed?.();
    return { status: 200, headers: JSON.parse(reply.headers) as Record<string, string>, body };
  }

  /** Keeps a committed turn's reply (`version`: the trajectory's right after the commit; undefined: not committed). */
  keep(
    t: Trajectory,
    version: number | undefined,
    request: { body: Buffer; headers: Headers },
    reply: { headers: Record<string, string>; pieces: Buffer[]; streamed: boolean },
  ): void {
    if (version === undefined || t.version !== version) return; // not committed, or the session moved on already
    const kept: KeptReply = {
      version,
      requestDigest: digest(request.body),
      idempotencyKey: header(request.headers, "idempotency-key"),
      headers: JSON.stringify(reply.headers),
      bytes: compact(reply.pieces),
      at: performance.now(),
      events: reply.streamed ? reply.pieces.map((p) => p.length) : undefined,
    };
    this.#kept.set(t, kept);
    this.#young.push(t);
    this.#youngAt.push(kept.at);
    this.#timer ??= setTimeout(() => this.#packOld(), this.#packAfterMs).unref();
  }

  /** Whether `t`'s kept reply is packed, and the characters it holds (for tests). */
  held(t: Trajectory): { packed: boolean; chars: number } | undefined {
    const kept = this.#kept.get(t);
    return kept && { packed: isPacked(kept), chars: kept.bytes.length + (kept.headers?.length ?? 0) };
  }

  close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#young = [];
    this.#youngAt = [];
  }

  /** Packs the replies kept for PACK_AFTER_MS and still the last of their sessions. */
  #packOld(): void {
    this.#timer = undefined;
    const now = performance.now();
    let i = 0;
    for (; i < this.#young.length && now - this.#youngAt[i]! >= this.#packAfterMs; i++) {
      const t = this.#young[i]!;
      const kept = this.#kept.get(t);
      if (kept === undefined || isPacked(kept)) continue;
      // The session moved on (a rollback, a turn not kept): nothing will be answered from it.
      if (kept.version !== t.version) this.#kept.delete(t);
      // Kept again since: its own entry comes later.
      else if (now - kept.at >= this.#packAfterMs) pack(kept);
    }
    if (i > 0) {
      this.#young = this.#young.slice(i);
      this.#youngAt = this.#youngAt.slice(i);
    }
    const next = this.#youngAt[0];
    if (next !== undefined) this.#timer = setTimeout(() => this.#packOld(), next + this.#packAfterMs - now).unref();
  }
}

function pack(kept: KeptReply): void {
  const whole = Buffer.concat([Buffer.from(`${kept.headers}\n`, "utf8"), Buffer.from(kept.bytes, "latin1")]);
  kept.bytes = deflateRawSync(whole, { dictionary: DICTIONARY }).toString("latin1");
  kept.headers = undefined;
}

/** A packed reply holds its headers inside its deflated bytes. */
const isPacked = (kept: KeptReply): boolean => kept.headers === undefined;

/** A kept reply's headers and bytes, packed or not. */
function unpack(kept: KeptReply): { headers: string; bytes: Buffer } {
  if (!isPacked(kept)) return { headers: kept.headers!, bytes: Buffer.from(kept.bytes, "latin1") };
  const whole = inflateRawSync(Buffer.from(kept.bytes, "latin1"), { dictionary: DICTIONARY });
  // JSON.stringify escapes every newline: the first one ends the headers.
  const newline = whole.indexOf(0x0a);
  return { headers: whole.toString("utf8", 0, newline), bytes: Buffer.from(whole.subarray(newline + 1)) };
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
