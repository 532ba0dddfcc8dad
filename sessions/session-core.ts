// The session core of one shard: health, create, get, delete, chat and proxy over plain
// values ({method, path, query, headers, body} in, {status, headers, body} out). A chat
// turn follows TITO.md "One chat turn": plan under the session lock, call the engine
// without it, validate the reply, commit under the lock again unless the session moved
// on. Expected failures become coded error responses; only bugs throw. No HTTP server.
import type { Logger } from "pino";
import type { ChatMessage } from "./chat-template.ts";
import { compareTrajectories } from "./drift.ts";
import { InvalidChatRequestError, InvalidJsonError, SessionNotFoundError, TitoError } from "./errors.ts";
import { planPrompt, renderOrThrow, type PromptContext } from "./prompt-builder.ts";
import { checkProxyPath } from "../engine/proxy-path.ts";
import { MemoryRecordStore, sessionBodyEnds, type RecordStore } from "./journal/records.ts";
import { SessionRegistry } from "./registry.ts";
import { sessionRebuilder, type ReplayCounts } from "./journal/session-replay.ts";
import { sampleJson, sampleSafetensors } from "./journal/sample-encode.ts";
import { buildSample, parseSampleRequest } from "./journal/samples.ts";
import { ReplyBuffers } from "../engine/reply-buffers.ts";
import { scanReply } from "../engine/reply-scan.ts";
import { buildUpstreamBody, idsText, rememberCheckpointText } from "../engine/request-body.ts";
import { selectFamily } from "./families/index.ts";
import { bundledQwen3Dir, loadTokenizerFolder, type TokenizerFolder } from "./tokenizer-folder.ts";
import type { Trajectory } from "./trajectory.ts";
import { createUpstream, forwardHeaders, type Upstream, type UpstreamObservation } from "../engine/upstream.ts";

export interface CoreRequest {
  method: string;
  /** For proxy: the path after /sessions/{id}; for chat: "/v1/chat/completions". */
  path: string;
  /** Raw query string without "?", "" if none. */
  query: string;
  /** The client's request headers, lower-case names. */
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export interface CoreResponse {
  status: number;
  /** Never framing headers. */
  headers: Record<string, string>;
  /** A chunk list is written in order by the caller, never concatenated; a stream (records GET from the journal) is passed on as it is. */
  body: Buffer | Buffer[] | AsyncIterable<Buffer>;
}

export interface SessionCoreOptions {
  engineUrl: string;
  tokenizerDir?: string;
  /** An already loaded folder (tests share one; saves the ~1 s load); wins over tokenizerDir. */
  tokenizerFolder?: TokenizerFolder;
  titoFamily?: "default" | "qwen3";
  chatTemplateKwargs?: Record<string, unknown>;
  allowedAppendRoles?: string[];
  routingReplay?: boolean;
  indexerReplay?: boolean;
  engineTimeoutMs?: number;
  /** When set, `authorization` never goes upstream. */
  authToken?: string;
  /** Appended to every session-not-found message. */
  notFoundHint?: string;
  logger?: Logger;
  /** Called after every engine call (metrics); must not throw. */
  onUpstream?: (observation: UpstreamObservation) => void;
  /** Where records live; the in-memory store by default. */
  recordStore?: RecordStore;
}

const CHAT_PATH = "/v1/chat/completions";
const JSON_HEADERS = { "content-type": "application/json" };
const json = (status: number, value: unknown): CoreResponse => ({
  status,
  headers: { ...JSON_HEADERS },
  body: Buffer.from(JSON.stringify(value)),
});

/** A coded error as `{"error": message}` with its status; anything else is a 500. */
export function errorResponse(err: unknown): CoreResponse {
  if (err instanceof TitoError) return json(err.status, { error: err.message });
  return json(500, { error: `internal error: ${err instanceof Error ? err.message : String(err)}` });
}

interface PreparedTurn {
  promptIds: number[];
  /** promptIds as decimal text (idsText). */
  promptText: string;
  messages: ChatMessage[];
  tools?: unknown[];
  upstreamBody: Buffer;
  version: number;
}

function parseChatBody(bytes: Buffer): Record<string, unknown> {
  let body: unknown;
  try {
    body = JSON.parse(bytes.toString("utf8"));
  } catch (err) {
    throw new InvalidJsonError((err as Error).message, { cause: err });
  }
  if (!body || typeof body !== "object" || Array.isArray(body))
    throw new InvalidChatRequestError("chat request body must be a JSON object");
  const b = body as Record<string, unknown>;
  if (!Array.isArray(b.messages) || b.messages.length === 0)
    throw new InvalidChatRequestError("chat request needs a non-empty `messages` list");
  b.messages.forEach((m: unknown, i: number) => {
    if (!m || typeof m !== "object" || typeof (m as { role?: unknown }).role !== "string") {
      throw new InvalidChatRequestError(`messages[${i}] must be an object with a string \`role\``);
    }
  });
  if (b.tools !== undefined && b.tools !== null && !Array.isArray(b.tools))
    throw new InvalidChatRequestError("`tools` must be a list");
  return b;
}

export class SessionCore {
  readonly #ctx: PromptContext;
  readonly #registry: SessionRegistry;
  readonly #records: RecordStore;
  readonly #upstream: Upstream;
  /** Pooled receive buffers for large replies, when the record store does not keep replies. */
  readonly #replyBuffers: ReplyBuffers | undefined;
  readonly #options: SessionCoreOptions;
  readonly #log?: Logger;

  constructor(options: SessionCoreOptions) {
    const folder = options.tokenizerFolder ?? loadTokenizerFolder(options.tokenizerDir ?? bundledQwen3Dir());
    this.#options = options;
    this.#ctx = {
      folder,
      family: selectFamily(folder, options.titoFamily),
      kwargs: options.chatTemplateKwargs ?? {},
      allowedAppendRoles: options.allowedAppendRoles ?? ["tool"],
    };
    this.#registry = new SessionRegistry(options.notFoundHint ?? "");
    this.#records = options.recordStore ?? new MemoryRecordStore();
    this.#replyBuffers = this.#records.retainsReplyBuffers ? undefined : new ReplyBuffers();
    this.#upstream = createUpstream(options.engineUrl, options.engineTimeoutMs ?? 600_000, options.onUpstream);
    this.#log = options.logger;
  }

  /** The TITO family in use (detected or configured). */
  get familyName(): string {
    return this.#ctx.family.name;
  }

  health(): CoreResponse {
    return json(200, { status: "ok" });
  }

  sessionCount(): number {
    return this.#registry.size;
  }

  /** Rebuilds the sessions the record store holds from before this process (journal replay). */
  async recover(): Promise<ReplayCounts> {
    const rebuilder = sessionRebuilder(this.#registry);
    await this.#records.recover(rebuilder);
    return rebuilder.counts();
  }

  async create(sessionId?: string): Promise<CoreResponse> {
    return this.#guard(async () => {
      const t = this.#registry.create(sessionId);
      try {
        await this.#records.open(t.id);
      } catch (err) {
        this.#registry.forget(t.id); // not acknowledged: the session does not exist
        throw err;
      }
      return json(200, { session_id: t.id });
    });
  }

  async get(sessionId: string): Promise<CoreResponse> {
    return this.#guard(async () => {
      const t = this.#registry.get(sessionId);
      // Under the lock: records and token ids from the same committed state.
      return t.lock.run(() => {
        if (t.closing) throw new SessionNotFoundError(sessionId, this.#registry.notFoundHint);
        const metadata: Record<string, unknown> = {
          accumulated_token_ids: t.currentIds,
          max_trim_tokens: this.#ctx.family.maxTrimTokens,
        };
        if (t.assistantCount > 0) metadata.tito_session_mismatch = this.#drift(t);
        const { head, tail } = sessionBodyEnds(t.id, metadata);
        return { status: 200, headers: { ...JSON_HEADERS }, body: this.#records.body(t.id, head, tail) };
      });
    });
  }

  async delete(sessionId: string): Promise<CoreResponse> {
    return this.#guard(async () => {
      await this.#registry.delete(sessionId, (t) => this.#records.drop(t.id));
      return { status: 204, headers: {}, body: Buffer.alloc(0) };
    });
  }

  async chat(sessionId: string, req: CoreRequest, signal?: AbortSignal): Promise<CoreResponse> {
    return this.#guard(async () => {
      const t = this.#registry.get(sessionId);
      const turn = await t.lock.run(() => this.#prepare(t, req.body));
      const headers = forwardHeaders(req.headers, this.#options.authToken !== undefined);
      // The reply is scanned as bytes: ask for it uncompressed, and send our own JSON body.
      delete headers["accept-encoding"];
      headers["content-type"] = "application/json";
      const res = await this.#upstream.send({
        method: "POST",
        path: CHAT_PATH,
        headers,
        body: turn.upstreamBody,
        signal,
        pooled: this.#replyBuffers,
      });
      // A pooled reply's buffers are reused once released: whatever is sent on is copied first.
      const own = (parts: Buffer[]) => (res.release ? [Buffer.concat(parts)] : parts);
      try {
        if (res.status !== 200) return { ...res, body: own(res.body), release: undefined };
        const scanned = scanReply(res.body, res.quotes);
        await t.lock.run(async () => {
          if (t.closing || t.version !== turn.version) {
            this.#log?.warn(
              { sessionId, closing: t.closing },
              "session changed while the engine answered; turn returned but not recorded",
            );
            return;
          }
          const input = {
            promptIds: turn.promptIds,
            completionIds: scanned.completionIds,
            messages: [...turn.messages, scanned.message],
            tools: turn.tools,
          };
          t.verify(input, this.#ctx.family.maxTrimTokens);
          // Stored before it is applied or acknowledged: a failed write leaves the session as it was.
          const record = {
            timestamp: Date.now() / 1000,
            method: "POST",
            path: CHAT_PATH,
            statusCode: 200,
            request: turn.upstreamBody,
            response: res.body,
            responseCrc: res.crc,
          };
          await this.#records.append(t.id, record, {
            index: t.assistantCount,
            completionIds: scanned.completionIds,
            assistant: scanned.message,
          });
          const previous = t.currentIds;
          t.restore(input);
          rememberCheckpointText(t.currentIds, turn.promptText, scanned.completionIds, previous);
        });
        return { status: 200, headers: res.headers, body: own(scanned.clientBody) };
      } finally {
        res.release?.();
      }
    });
  }

  /** POST /sessions/{id}/samples: the committed trajectory as one training sample (samples.ts). */
  async samples(sessionId: string, req: CoreRequest): Promise<CoreResponse> {
    return this.#guard(async () => {
      const t = this.#registry.get(sessionId);
      const request = parseSampleRequest(req.body, req.query, req.headers);
      // Under the lock: turns and records from the same committed state.
      const encoded = await t.lock.run(async () => {
        if (t.closing) throw new SessionNotFoundError(sessionId, this.#registry.notFoundHint);
        const sample = buildSample(t.id, t.turns, await this.#records.list(t.id), request.maxSeqLen);
        return request.format === "safetensors" ? sampleSafetensors(sample) : sampleJson(sample);
      });
      return { status: 200, headers: { "content-type": encoded.contentType }, body: encoded.body };
    });
  }

  async proxy(_sessionId: string, req: CoreRequest, signal?: AbortSignal): Promise<CoreResponse> {
    return this.#guard(async () => {
      const path = checkProxyPath(req.path) + (req.query ? `?${req.query}` : "");
      const headers = forwardHeaders(req.headers, this.#options.authToken !== undefined);
      return this.#upstream.send({ method: req.method.toUpperCase(), path, headers, body: req.body, signal });
    });
  }

  async close(): Promise<void> {
    await this.#upstream.close();
    await this.#records.close();
  }

  /** Step 1 of a turn, under the lock: parse, force fields, plan the prompt, apply a rollback. */
  async #prepare(t: Trajectory, bytes: Buffer): Promise<PreparedTurn> {
    if (t.closing) throw new SessionNotFoundError(t.id, this.#registry.notFoundHint);
    const body = parseChatBody(bytes);
    const messages = body.messages as ChatMessage[];
    const tools = Array.isArray(body.tools) ? body.tools : undefined;
    const plan = planPrompt(this.#ctx, t, messages, tools);
    if (plan.rollbackToTurns !== undefined) {
      this.#log?.info({ sessionId: t.id, from: t.assistantCount, to: plan.rollbackToTurns }, "rollback");
      await this.#records.truncate(t.id, plan.rollbackToTurns);
      t.rollbackTo(plan.rollbackToTurns);
    }
    const forced: Record<string, unknown> = { logprobs: true, return_meta_info: true, no_stop_trim: false };
    if (this.#options.routingReplay) forced.return_routed_experts = true;
    if (this.#options.indexerReplay) forced.return_indexer_topk = true;
    const promptText = idsText(plan.promptIds, plan.base);
    const upstreamBody = buildUpstreamBody(bytes, body, forced, plan.promptIds, promptText);
    return { promptIds: plan.promptIds, promptText, messages, tools, upstreamBody, version: t.version };
  }

  #drift(t: Trajectory) {
    const { folder, family, kwargs } = this.#ctx;
    const text = renderOrThrow(folder, t.messages, { addGenerationPrompt: false, kwargs, tools: t.lastTools });
    return compareTrajectories(folder, family, folder.encode(text), t.currentIds);
  }

  async #guard(op: () => Promise<CoreResponse>): Promise<CoreResponse> {
    try {
      return await op();
    } catch (err) {
      if (err instanceof TitoError) return errorResponse(err);
      throw err;
    }
  }
}

/** Loads the tokenizer synchronously and opens the upstream pool. */
export function createSessionCore(options: SessionCoreOptions): SessionCore {
  return new SessionCore(options);
}
