// Coded errors of the session layer (docs/architecture.md, "Errors"). Every class has a stable `code`
// that is never reused, an HTTP status where it has one, and an optional cause.
// test/sessions/errors.test.ts checks that every code is documented in docs/errors.md.
// Expected outcomes (a client or the engine at fault) are these classes; a broken
// internal invariant is a bug and uses node:assert instead.

import { CodedError } from "../buffers/coded-error.ts";

/** The sessions layer's errors: one base, so a caller can tell the layer. */
export class TitoError extends CodedError {}

/** A tokenizer folder is missing a file or holds one that cannot be read. */
export class TokenizerLoadError extends TitoError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("TITO_ERR_TOKENIZER_LOAD", 500, message, options);
  }
}

/** The session core was configured with values it cannot use (e.g. an unknown TITO family). */
export class SessionConfigError extends TitoError {
  constructor(message: string) {
    super("TITO_ERR_CONFIG", 500, message);
  }
}

/** No live session has this id (never created, deleted, or being deleted). */
export class SessionNotFoundError extends TitoError {
  constructor(sessionId: string, hint = "") {
    super("TITO_ERR_SESSION_NOT_FOUND", 404, `session not found: session_id=${sessionId}${hint}`);
  }
}

/** The session was deleted for being idle longer than --session-idle-ttl-s (also after a worker restart). */
export class SessionExpiredError extends TitoError {
  constructor(sessionId: string) {
    super(
      "TITO_ERR_SESSION_EXPIRED",
      404,
      `session expired: session_id=${sessionId} (it was idle longer than --session-idle-ttl-s and was deleted)`,
    );
  }
}

/** A caller-supplied session id is already taken: never silently reuse a trajectory. */
export class SessionExistsError extends TitoError {
  constructor(sessionId: string) {
    super("TITO_ERR_SESSION_EXISTS", 409, `session already exists: session_id=${sessionId}`);
  }
}

/** A caller-supplied session id that cannot be used as one. */
export class InvalidSessionIdError extends TitoError {
  constructor(message: string) {
    super("TITO_ERR_INVALID_SESSION_ID", 400, message);
  }
}

/** The chat request body is not JSON. */
export class InvalidJsonError extends TitoError {
  constructor(detail: string, options?: { cause?: unknown }) {
    super("TITO_ERR_INVALID_JSON", 400, `invalid JSON body: ${detail}`, options);
  }
}

/** The chat request is JSON but not a chat request (e.g. no `messages` list). */
export class InvalidChatRequestError extends TitoError {
  constructor(message: string) {
    super("TITO_ERR_INVALID_CHAT_REQUEST", 400, message);
  }
}

/** A session's turns came through one client API (chat or Anthropic messages) and a request uses the other. */
export class ClientApiMixError extends TitoError {
  constructor(sessionId: string, has: string, asked: string) {
    super(
      "TITO_ERR_CLIENT_API_MIX",
      400,
      `session ${sessionId} speaks the ${has} API (${ROUTES[has] ?? has}); it cannot take a turn through the ${asked} API (${ROUTES[asked] ?? asked}): one session, one API`,
    );
  }
}
const ROUTES: Record<string, string> = { chat: "/v1/chat/completions", messages: "/v1/messages" };

/** An Anthropic Messages request that cannot be turned into a chat turn (docs/agents.md). */
export class InvalidMessagesRequestError extends TitoError {
  constructor(message: string) {
    super("TITO_ERR_INVALID_MESSAGES_REQUEST", 400, message);
  }
}

/** A request's `chat_template_kwargs` contradicts a kwarg the model family pins (it would break append-only rendering). */
export class PinnedKwargError extends TitoError {
  constructor(family: string, key: string, pinned: unknown, given: unknown) {
    super(
      "TITO_ERR_PINNED_KWARG",
      400,
      `chat_template_kwargs.${key}=${JSON.stringify(given)} contradicts the ${family} family, which pins ${key}=${JSON.stringify(pinned)} to keep rendering append-only`,
    );
  }
}

/** The chat template could not render the request's messages (bad message shapes). */
export class TemplateRenderError extends TitoError {
  constructor(detail: string, options?: { cause?: unknown }) {
    super("TITO_ERR_TEMPLATE_RENDER", 400, `chat template failed to render the messages: ${detail}`, options);
  }
}

/** The request messages diverge from the trajectory in a way one-step rollback cannot absorb. */
export class RollbackError extends TitoError {
  constructor(detail: string) {
    super("TITO_ERR_ROLLBACK", 400, `rollback failed: ${detail}`);
  }
}

/** An appended message has a role that may not be appended (append-only rule). */
export class AppendRoleError extends TitoError {
  /** `why`: the reason the role is not appendable, when the template was found not to render it append-only. */
  constructor(index: number, role: string, allowed: readonly string[], why?: string) {
    super(
      "TITO_ERR_APPEND_ROLE",
      400,
      `append-only violation: message at index ${index} has role '${role}'; only roles [${allowed.map((r) => `'${r}'`).join(", ")}] may be appended after the last assistant turn` +
        (why === undefined ? "" : ` (${why})`),
    );
  }
}

/** A TITO tokenization invariant failed (prefix check, non-prefix renders). */
export class TokenizationError extends TitoError {
  constructor(message: string) {
    super("TITO_ERR_TOKENIZATION", 500, `tokenization error: ${message}`);
  }
}

/** The engine answered 200 with a body the session cannot use. */
export class EngineReplyError extends TitoError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("TITO_ERR_ENGINE_REPLY", 502, message, options);
  }

  /** An engine reply (or a stored record of one) that is not valid JSON: the `invalid` of buffers/json-scan.ts. */
  static notJson(this: void, detail: string, options?: { cause?: unknown }): EngineReplyError {
    return new EngineReplyError(`engine reply is not valid JSON: ${detail}`, options);
  }
}

/**
 * A streamed turn's deltas are not a prefix of what the family's parser makes of the whole
 * completion (a parser that is not local to its markers): the turn is not recorded.
 */
export class StreamDivergedError extends TitoError {
  constructor(family: string, what: string) {
    super(
      "TITO_ERR_STREAM_DIVERGED",
      500,
      `streamed reply diverged from the parsed completion (${family} family, ${what}); the turn was not recorded`,
    );
  }
}

/**
 * The engine ended the generation with an abort finish reason (SGLang `{"type": "abort"}`:
 * `/abort_request`, `/pause_generation` mode abort, a weight update with
 * `abort_all_requests`; vLLM `"abort"`). The half-generated answer is not a completion: it
 * is never committed, and the same request can be sent again.
 */
export class EngineAbortedError extends TitoError {
  /**
   * What the engine had generated when it aborted, when its reply carried it (ids and their
   * logprobs, equally long): `--on-engine-abort resume` continues from it (sessions/resumed-turn.ts).
   */
  readonly partial?: PartialCompletion;

  constructor(detail: string, partial?: PartialCompletion) {
    super(
      "TITO_ERR_ENGINE_ABORTED",
      503,
      `the engine aborted the generation (${detail}); nothing was recorded, send the turn again`,
      // Retry-After: the seconds the client should wait before sending the turn again.
      { headers: { "retry-after": "1" } },
    );
    this.partial = partial;
  }
}

/** The tokens an aborted generation had produced, with their logprobs. */
export interface PartialCompletion {
  ids: number[];
  logprobs: number[];
}

/** The partial of an aborted reply from SGLang `[logprob, id, …]` entries; undefined when they do not read. */
export function partialOfEntries(entries: unknown): PartialCompletion | undefined {
  if (!Array.isArray(entries)) return undefined;
  const ids: number[] = [];
  const logprobs: number[] = [];
  for (const entry of entries) {
    if (!Array.isArray(entry) || !Number.isInteger(entry[1])) return undefined;
    ids.push(entry[1] as number);
    logprobs.push(typeof entry[0] === "number" ? entry[0] : 0);
  }
  return { ids, logprobs };
}

/** The engine could not be reached (connection refused, reset, DNS, ...). */
export class EngineUnreachableError extends TitoError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("TITO_ERR_ENGINE_UNREACHABLE", 502, message, options);
  }
}

/** The engine request failed for another reason than reachability or time. */
export class EngineRequestError extends TitoError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("TITO_ERR_ENGINE_REQUEST", 502, message, options);
  }
}

/** The engine did not answer within the upstream timeout. */
export class EngineTimeoutError extends TitoError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("TITO_ERR_ENGINE_TIMEOUT", 502, message, options);
  }
}

/** A proxied path would leave the engine's root (`..` segments, encoded or not). */
export class ProxyPathError extends TitoError {
  constructor(path: string) {
    super("TITO_ERR_PROXY_PATH", 400, `invalid proxy path: ${JSON.stringify(path)} would escape the engine root`);
  }
}

/** The caller aborted the request (its client went away) before the engine answered. */
export class UpstreamAbortedError extends TitoError {
  constructor(options?: { cause?: unknown }) {
    // 499: nginx's "client closed request"; nobody reads it, but it must not look like success.
    super("TITO_ERR_UPSTREAM_ABORTED", 499, "request aborted by the caller", options);
  }
}

/** The samples request is not usable: bad JSON body, an unknown key, a bad max_seq_len or format. */
export class InvalidSampleRequestError extends TitoError {
  constructor(message: string) {
    super("TITO_ERR_INVALID_SAMPLE_REQUEST", 400, message);
  }
}

/** A recorded engine reply cannot become a training sample (e.g. routed_experts not a whole number of rows). */
export class SampleDataError extends TitoError {
  constructor(message: string) {
    super("TITO_ERR_SAMPLE_DATA", 502, message);
  }
}

/** A journal write (or its fsync) failed: the turn, create, rollback or delete is not acknowledged. */
export class JournalWriteError extends TitoError {
  constructor(path: string, options: { cause: unknown }) {
    const reason = options.cause instanceof Error ? options.cause.message : String(options.cause);
    super("TITO_ERR_JOURNAL_WRITE", 500, `journal write failed (${path}): ${reason}`, options);
  }
}

/** A journal entry that is not the torn last one fails its checks: replay stops, naming where. */
export class JournalCorruptError extends TitoError {
  constructor(path: string, offset: number, reason: string, options?: { cause?: unknown }) {
    super("TITO_ERR_JOURNAL_CORRUPT", 500, `journal corrupt: ${path} at byte offset ${offset}: ${reason}`, options);
  }
}

/** A turn over its session's budget (max_total_tokens, max_turns) or the engine's context length; the engine's own "prompt too long" too. */
export class SessionBudgetError extends TitoError {
  constructor(message: string) {
    super("TITO_ERR_BUDGET", 400, message);
  }
}

/** A session create body whose budget cannot be used (not a JSON object, an unknown key, a value that is not a positive integer). */
export class InvalidSessionBudgetError extends TitoError {
  constructor(message: string) {
    super("TITO_ERR_INVALID_BUDGET", 400, message);
  }
}

/** The session was finished (POST /sessions/{id}/abort or /admin/abort): it takes no more turns; its records and samples stay. */
export class SessionFinishedError extends TitoError {
  constructor(sessionId: string) {
    super(
      "TITO_ERR_SESSION_FINISHED",
      409,
      `session finished: session_id=${sessionId} was aborted and takes no more turns (its records and samples remain)`,
    );
  }
}

/** A tree-mode session holds --max-trajectory-nodes nodes: it takes no more turns. */
export class TrajectoryNodeLimitError extends TitoError {
  constructor(sessionId: string, limit: number) {
    super(
      "TITO_ERR_TRAJECTORY_NODES",
      409,
      `session ${sessionId} holds ${limit} trajectory nodes, the limit (--max-trajectory-nodes): it takes no more turns`,
    );
  }
}

/** A tree-mode turn would extend a node whose completion the engine cut at its token limit. */
export class LengthCutNodeError extends TitoError {
  constructor(sessionId: string, nodeId: string) {
    super(
      "TITO_ERR_NODE_CUT",
      409,
      `session ${sessionId}: node ${nodeId} was cut by length (finish_reason "length"); a turn cannot extend it (retry it instead)`,
    );
  }
}

/** A session body's `trajectory` is not "linear" or "tree". */
export class InvalidTrajectoryModeError extends TitoError {
  constructor(value: unknown) {
    super("TITO_ERR_INVALID_TRAJECTORY", 400, `trajectory must be "linear" or "tree", got ${JSON.stringify(value)}`);
  }
}

/** A fork body (POST /sessions/{id}/fork) that is not `{"at": <turn index>, "session_id"?: <id>}`. */
export class InvalidForkRequestError extends TitoError {
  constructor(message: string) {
    super("TITO_ERR_INVALID_FORK_REQUEST", 400, message);
  }
}

/** A fork at a turn the session has not committed (its `at` is not below its turn count). */
export class ForkTurnError extends TitoError {
  constructor(sessionId: string, at: number, turns: number) {
    super(
      "TITO_ERR_FORK_TURN",
      409,
      `cannot fork session_id=${sessionId} at turn ${at}: it has ${turns} committed turn${turns === 1 ? "" : "s"} (at is 0-based)`,
    );
  }
}

/** A fork's caller-chosen session id that another shard owns: a fork lives on its parent's shard. */
export class ForkPlacementError extends TitoError {
  constructor(message: string) {
    super("TITO_ERR_FORK_PLACEMENT", 409, message);
  }
}

/** A fork of a tree-mode session at a turn index: its turns are nodes, and an index names no one history. */
export class ForkTreeError extends TitoError {
  constructor(sessionId: string) {
    super(
      "TITO_ERR_FORK_TREE",
      409,
      `cannot fork session_id=${sessionId} at a turn index: it is a tree-mode session, whose turns are nodes of a tree (docs/trajectories.md); fork it at a node id ("at": "n3"; GET /sessions/${sessionId}/tree lists them)`,
    );
  }
}

/** A fork at a node id the session has no node of (a linear session has none: it forks at a turn index). */
export class ForkNodeError extends TitoError {
  constructor(sessionId: string, at: string, nodes: number | undefined) {
    super(
      "TITO_ERR_FORK_NODE",
      409,
      nodes === undefined
        ? `cannot fork session_id=${sessionId} at node ${JSON.stringify(at)}: it is a linear session, forked at a 0-based turn index ("at": 0)`
        : `cannot fork session_id=${sessionId} at node ${JSON.stringify(at)}: it has no such node (its ${nodes} node${nodes === 1 ? " is n0" : `s are n0 to n${nodes - 1}`}; GET /sessions/${sessionId}/tree lists them)`,
    );
  }
}
