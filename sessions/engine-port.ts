// The one thing the session core asks of an inference engine, as an interface the core
// owns: "generate from these prompt ids, for this chat request". The adapters that speak
// each engine API live in engine/ and implement it; the worker wires one in. The core never
// builds an engine request or reads an engine reply itself, so it never imports engine/.
import type { ChatMessage } from "./chat-template.ts";
import type { TitoFamily } from "./families/index.ts";
import type { CancelSignal } from "../buffers/cancel.ts";

/** The model's sampling defaults (its generation_config.json), filled in where the client left a field unset. */
export interface SamplingDefaults {
  temperature?: number;
  top_p?: number;
  top_k?: number;
}

/** One chat turn to generate: the prompt as token ids, and the client's request. */
export interface EngineTurnRequest {
  /** The client's request body as received (its bytes may be spliced into the engine's). */
  clientBytes: Buffer;
  /** `clientBytes` parsed: a JSON object with a non-empty `messages` list. */
  body: Record<string, unknown>;
  /** The prompt: every id the model sees, exactly as the trajectory holds them. */
  promptIds: ArrayLike<number>;
  /** `promptIds` as decimal JSON text ("1,2,3") in ASCII bytes (ids-text.ts idsBytes). */
  promptBytes: Buffer;
  /** The session's model family: the token-level APIs parse the completion text with it. */
  family: TitoFamily;
  /** The turn's template kwargs (server, family pins, request): the chat API forwards them as `chat_template_kwargs`. */
  templateKwargs?: Readonly<Record<string, unknown>>;
  /** The client's request headers, lower-case names; the adapter decides what goes upstream. */
  headers: Record<string, string | string[] | undefined>;
  /** Sampling defaults for fields the client left unset (generation-config.ts); none: the engine's own. */
  samplingDefaults?: Readonly<SamplingDefaults>;
  /** The client asked for `stream: true`: a 200 is an EngineStream of `chat.completion.chunk` events. */
  stream?: boolean;
  signal?: CancelSignal;
  /** The prefix-cache salt (upstream-keys.ts): SGLang's `extra_key` on /generate, `cache_salt` elsewhere; none: no field. */
  cacheSalt?: string;
  /**
   * `--cache-salt turn`: the salt is the version a request is sent under, so a continuation
   * sent under another one (engine/resumed-turn.ts) carries that version's salt, not the first's.
   */
  cacheSaltFollowsVersion?: boolean;
  /** The session's routing key, sent in the --engine-session-headers (upstream-keys.ts). */
  routingKey?: string;
  /** The policy version the turn was sent under (the router's door; docs/rl-loop.md). */
  weightVersion?: string | null;
}

/** A reply the engine refused or failed (its status is not 200): passed to the client as it is. */
export interface EngineRefusal {
  ok: false;
  status: number;
  headers: Record<string, string>;
  body: Buffer[];
}

/** A generated turn: what the trajectory appends, what the record keeps, what the client gets. */
export interface EngineCompletion {
  ok: true;
  /** The engine route that generated it (kept in the record). */
  path: string;
  /** Whether `request` carries the conversation (messages, tools); else the record keeps it beside. */
  requestHasConversation: boolean;
  /** The body sent to the engine, as the parts it was written in (kept in the record). */
  request: Buffer[];
  /** The engine's reply as received, routing payloads included (kept in the record). */
  response: Buffer[];
  /** CRC-32 of `response`, when the client computed it as the bytes arrived. */
  responseCrc?: number;
  /** The generated ids, exactly as the engine produced them (stop token included). */
  completionIds: number[];
  /** The assistant message as the client sees it (content, reasoning, tool calls). */
  message: ChatMessage;
  /** The client's reply body (an OpenAI chat.completion, without routing payloads). */
  clientBody: Buffer[];
  /** Reply headers for the client. */
  headers: Record<string, string>;
  /** The engine's own policy version (`meta_info.weight_version`), when the reply carried one. */
  engineWeightVersion?: string;
  /** Set when the engine aborted the turn and it was continued (`--on-engine-abort resume`). */
  resumed?: ResumedTurn;
  /**
   * Set when `response` lives in pooled buffers: hands them back. Nothing may keep a view of
   * `response` or `clientBody` after it (the core copies what it sends on first).
   */
  release?: () => void;
}

/** The tokens of one engine request that was aborted, and the policy version it was sent under. */
export interface ResumedPart {
  completionIds: number[];
  logprobs: number[];
  weightVersion: string | null;
}

/**
 * A turn the engine aborted and that was continued (docs/rl-loop.md, "Partial rollouts"):
 * `request` and `response` are its last engine exchange, whose prompt is the turn's prompt
 * followed by every part's ids; `completionIds` is all parts' ids, then the last reply's.
 */
export interface ResumedTurn {
  /** The aborted requests' tokens, in order. */
  parts: ResumedPart[];
  /** The version the last request was sent under. */
  weightVersion: string | null;
}

/**
 * A streamed turn: the client's events as the engine generates (each Buffer is whole SSE
 * events, ending with the finish and usage chunks, never `data: [DONE]`), then, as the
 * generator's return value, the completion to commit. An engine failure midway throws a
 * coded error; `return()` stops the engine request. Nothing is committed by the adapter.
 */
export interface EngineStream {
  ok: true;
  /** Reply headers for the client (an event stream). */
  headers: Record<string, string>;
  events: AsyncGenerator<Buffer, EngineCompletion, undefined>;
  /** Stops the engine request and frees what the stream holds, whether its events were read or not (idempotent). */
  cancel(): void;
}

export type EngineTurn = EngineRefusal | EngineCompletion | EngineStream;

/** Whether a turn is a stream (its completion comes at the end of its events). */
export const isEngineStream = (turn: EngineTurn): turn is EngineStream => turn.ok && "events" in turn;

/** A request passed through to the engine unchanged (the session's proxy route). */
export interface EngineProxyRequest {
  method: string;
  /** The path below the session, e.g. "/v1/models"; the adapter checks it. */
  path: string;
  /** Raw query string without "?", "" if none. */
  query: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  signal?: CancelSignal;
  /** The session's routing key, sent in the --engine-session-headers. */
  routingKey?: string;
}

export interface EngineProxyReply {
  status: number;
  headers: Record<string, string>;
  body: Buffer[];
}

/** Sends a chat turn's prompt ids to the engine; failures throw coded errors (502/504, 400). */
export interface Engine {
  /** Which engine API this adapter speaks (`--engine-api`). */
  readonly api: string;
  generate(turn: EngineTurnRequest): Promise<EngineTurn>;
  /**
   * The model's context length in tokens (prompt plus completion) as the engine states it,
   * read once and kept (engine/context-length.ts); undefined when the engine states none.
   * `headers`: the client's (its credentials may be needed to read it).
   */
  contextLength?(headers: EngineTurnRequest["headers"], signal?: CancelSignal): Promise<number | undefined>;
  proxy(req: EngineProxyRequest): Promise<EngineProxyReply>;
  close(): Promise<void>;
}
