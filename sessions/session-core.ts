// The session core of one shard: health, create, get, delete, chat and proxy over plain
// values ({method, path, query, headers, body} in, {status, headers, body} out). A chat
// turn (docs/architecture.md, "One chat turn"): plan the prompt under the session lock,
// have the engine generate from its ids without the lock (engine-port.ts), then verify and
// commit under the lock again unless the session moved on. A streamed turn (`stream: true`)
// answers with a body that is the adapter's events, and commits the same way after the
// engine's last chunk and before `data: [DONE]` (streamed-turn.ts). Expected failures
// become coded error responses; only bugs throw.
// No HTTP server, and no engine protocol: the worker hands the core an Engine.
import type { Logger } from "pino";
import type { ChatMessage } from "./chat-template.ts";
import { probedContext } from "./append-probe.ts";
import { driftOf } from "./drift.ts";
import { SessionFinishedError, SessionNotFoundError, TitoError, UpstreamAbortedError } from "./errors.ts";
import { checkClientApi, parseChatBody, type ClientApi } from "./chat-request.ts";
import { IdleExpiry } from "./idle-expiry.ts";
import { planPrompt, type PromptContext } from "./prompt-builder.ts";
import { lengthHeader, MemoryRecordStore, sessionBodyEnds, type RecordStore } from "./journal/records.ts";
import { SessionRegistry } from "./registry.ts";
import { sessionRebuilder, type ReplayCounts } from "./journal/session-replay.ts";
import { parseSampleRequest } from "./journal/samples.ts";
import { forkSession, type ForkPlacement } from "./session-fork.ts";
import { encodeSample } from "./core-samples.ts";
import { isEngineStream, type Engine, type EngineCompletion, type SamplingDefaults } from "./engine-port.ts";
import { readGenerationDefaults } from "./generation-config.ts";
import { streamedTurn } from "./streamed-turn.ts";
import { idsBytes } from "./ids-text.ts";
import { listPage, summarize, type ListOptions, type ListPage } from "./session-summary.ts";
import { selectFamily, type TitoFamilyName } from "./families/index.ts";
import { serverKwargs, TurnKwargs } from "./template-kwargs.ts";
import { bundledQwen3Dir, loadTokenizerFolder } from "./tokenizer-folder.ts";
import type { Trajectory } from "./trajectory.ts";
import type { PreparedTurn } from "./prepared-turn.ts";
import { upstreamKeys, type CacheSaltMode } from "./upstream-keys.ts";
import { addNode, nodeFields, placeTurn, reholdParent } from "./tree/tree-turn.ts";
import { DEFAULT_MAX_TRAJECTORY_NODES, TrajectoryTree } from "./tree/tree.ts";
import { trajectoryMode, type TreeOptions } from "./tree/tree-options.ts";
import { scanReplyFacts } from "./journal/record-scan.ts";
import { encodeTreeSamples } from "./tree/tree-samples.ts";
import { outline } from "./tree/tree-outline.ts";
import type { CancelSignal } from "../buffers/cancel.ts";
import { keepingEvents, TurnReplays } from "./turn-replay.ts";
import { finishSession } from "./session-finish.ts";
import { capMaxTokens, checkBudget, engineOverflow, parseBudget, type SessionBudget } from "./budget.ts";
import { errorResponse, json, JSON_HEADERS, type CoreRequest, type CoreResponse } from "./core-message.ts";
export { errorResponse, type CoreRequest, type CoreResponse } from "./core-message.ts";
export type { SessionCoreOptions, TurnContext } from "./core-options.ts";
import type { SessionCoreOptions, TurnContext } from "./core-options.ts";

export class SessionCore {
  readonly #ctx: PromptContext;
  readonly #kwargs: TurnKwargs;
  readonly #registry: SessionRegistry;
  readonly #records: RecordStore;
  readonly #engine: Engine;
  readonly #log?: Logger;
  readonly #idle?: IdleExpiry;
  readonly #samplingDefaults?: SamplingDefaults;
  readonly #replays: TurnReplays;
  readonly #budget: SessionBudget;
  readonly #salt: CacheSaltMode;
  readonly #tree: Required<Pick<TreeOptions, "mode" | "maxNodes">> & TreeOptions;

  constructor(options: SessionCoreOptions) {
    const folder = options.tokenizerFolder ?? loadTokenizerFolder(options.tokenizerDir ?? bundledQwen3Dir());
    const family = selectFamily(folder, options.titoFamily);
    this.#kwargs = new TurnKwargs(family, serverKwargs(family, options.chatTemplateKwargs));
    const ctx = probedContext(folder, family, this.#kwargs.base, options.allowedAppendRoles);
    this.#ctx = { ...ctx, matcher: options.messageMatcher };
    this.#registry = new SessionRegistry(options.notFoundHint ?? "");
    this.#records = options.recordStore ?? new MemoryRecordStore();
    this.#engine = options.engine;
    this.#samplingDefaults = options.generationConfig === false ? undefined : readGenerationDefaults(folder.dir);
    this.#log = options.logger;
    this.#replays = new TurnReplays(options.onTurnReplayed);
    this.#budget = options.sessionBudget ?? {};
    this.#salt = options.cacheSalt ?? "session";
    this.#tree = { mode: "linear", maxNodes: DEFAULT_MAX_TRAJECTORY_NODES, ...options.trajectory };
    if ((options.sessionIdleTtlS ?? 0) > 0)
      this.#idle = new IdleExpiry({
        ...options,
        ttlMs: options.sessionIdleTtlS! * 1000,
        registry: this.#registry,
        records: this.#records,
      });
  }

  /** The model family the sessions follow (chosen or detected). */
  get familyName(): TitoFamilyName {
    return this.#ctx.family.name;
  }
  /** Whether the tokenizer's tables came from the tokenizer cache (sessions/tokenizer-cache.ts). */
  get tokenizerFromCache(): boolean {
    return this.#ctx.folder.fromCache;
  }

  health = (): CoreResponse => json(200, { status: "ok" });

  sessionCount = (): number => this.#registry.size;
  /** The session tokenizer's decode, special tokens kept (a resumed turn's text: engine/resumed-turn.ts). */
  decode = (ids: readonly number[]): string => this.#ctx.folder.decode(ids);

  /** Up to `limit` live session ids greater than `after` (and starting with `prefix`), in id order (with `detail`, summaries), and whether more follow. */
  list(after: string, limit: number, options: ListOptions = {}): ListPage {
    const summary = (t: Trajectory) => summarize(t, this.#ctx.family.name, () => this.#drift(t));
    return listPage(this.#registry, after, limit, options, summary);
  }

  /** POST /sessions/{id}/abort: the session takes no more turns (409); a turn at the engine does not commit. */
  async finish(sessionId: string): Promise<CoreResponse> {
    return this.#guard(async () => {
      await finishSession(this.#registry.get(sessionId), this.#records);
      return json(200, { session_id: sessionId, finished: true });
    });
  }

  /** Rebuilds the sessions the record store holds from before this process (journal replay). */
  async recover(): Promise<ReplayCounts> {
    const rebuilder = sessionRebuilder(this.#registry);
    await this.#records.recover(rebuilder);
    // A replayed session's idle time starts now.
    for (const id of this.#registry.ids()) this.#idle?.touch(id);
    return rebuilder.counts();
  }

  /** `body`: the session's budget, `{"max_total_tokens": N, "max_turns": T}` (budget.ts), or empty. */
  async create(sessionId?: string, body?: Buffer): Promise<CoreResponse> {
    return this.#guard(async () => {
      const budget = parseBudget(body, this.#budget);
      const tree = trajectoryMode(body, this.#tree.mode) === "tree" ? "tree" : undefined;
      const t = this.#registry.create(sessionId);
      t.budget = budget;
      if (tree) t.tree = new TrajectoryTree();
      try {
        await this.#records.open(t.id, { budget, trajectory: tree });
      } catch (err) {
        this.#registry.forget(t.id); // not acknowledged: the session does not exist
        throw err;
      }
      this.#idle?.touch(t.id);
      return json(200, { session_id: t.id });
    });
  }

  /** POST /sessions/{id}/fork: a new session from the path up to a turn (session-fork.ts). */
  async fork(sessionId: string, body?: Buffer, placement?: ForkPlacement): Promise<CoreResponse> {
    const deps = { registry: this.#registry, records: this.#records, idle: this.#idle };
    return this.#guard(() => forkSession(deps, sessionId, body, placement));
  }

  async get(sessionId: string): Promise<CoreResponse> {
    return this.#guard(async () => {
      const t = this.#registry.get(sessionId);
      this.#idle?.touch(sessionId);
      // Under the lock: records and token ids from the same committed state.
      return t.lock.run(() => {
        if (t.closing) throw new SessionNotFoundError(sessionId, this.#registry.notFoundHint);
        const metadata: Record<string, unknown> = {
          accumulated_token_ids: t.currentIds,
          max_trim_tokens: this.#ctx.family.maxTrimTokens,
          tito_family: this.#ctx.family.name,
          engine_api: this.#engine.api, // whose logprobs the records hold (docs/engines.md)
        };
        if (t.assistantCount > 0) metadata.tito_session_mismatch = this.#drift(t);
        const { head, tail } = sessionBodyEnds(t.id, metadata);
        const body = this.#records.body(t.id, head, tail);
        return { status: 200, headers: { ...JSON_HEADERS, ...lengthHeader(body) }, body };
      });
    });
  }

  async delete(sessionId: string): Promise<CoreResponse> {
    return this.#guard(async () => {
      await this.#registry.delete(sessionId, (t) => this.#records.drop(t.id));
      this.#idle?.forget(sessionId);
      return { status: 204, headers: {}, body: Buffer.alloc(0) };
    });
  }

  async chat(
    sessionId: string,
    req: CoreRequest,
    signal?: CancelSignal,
    context: TurnContext = {},
  ): Promise<CoreResponse> {
    // Busy from the first moment: idle expiry never takes a session with a turn in flight.
    if (this.#idle) return this.#idle.busy(sessionId, () => this.#chat(sessionId, req, signal, context));
    return this.#chat(sessionId, req, signal, context);
  }

  async #chat(sessionId: string, req: CoreRequest, signal: CancelSignal | undefined, context: TurnContext) {
    return this.#guard(async () => {
      const t = this.#registry.get(sessionId);
      // An SDK's resend of the last committed turn: its reply again, no engine call, no rollback.
      const again = await t.lock.run(() => (t.closing ? undefined : this.#replays.match(t, req.body, req.headers)));
      if (again) return again;
      // Read once per engine, before the lock (a turn over it is refused in #prepare).
      const limit = await this.#engine.contextLength?.(req.headers, signal);
      const turn = await t.lock.run(() => this.#prepare(t, req.body, context.api ?? "chat", limit));
      const res = await this.#engine.generate({
        clientBytes: turn.clientBytes,
        body: turn.body,
        promptIds: turn.promptIds,
        promptBytes: turn.promptBytes,
        family: this.#ctx.family,
        templateKwargs: this.#ctx.family.engineKwargs?.(turn.kwargs) ?? turn.kwargs,
        headers: req.headers,
        samplingDefaults: this.#samplingDefaults,
        stream: turn.body.stream === true,
        signal,
        ...upstreamKeys(this.#salt, t, context.weightVersion),
        weightVersion: context.weightVersion,
      });
      if (!res.ok) {
        const overflow = engineOverflow(res.status, res.body);
        if (overflow) throw overflow;
        return { status: res.status, headers: res.headers, body: res.body };
      }
      if (isEngineStream(res)) {
        // The session stays busy (no idle expiry) until the stream is over, not just until it began.
        let over = () => {};
        if (this.#idle) void this.#idle.busy(sessionId, () => new Promise<void>((r) => (over = r)));
        let committed: number | undefined;
        const body = streamedTurn(res, {
          commit: async (completion) => void (committed = await this.#commit(t, turn, completion, context, signal)),
          onFailure: (err, stage) =>
            this.#log?.warn({ sessionId, stage, err: (err as Error).message }, "streamed turn failed; not recorded"),
          onSettled: () => over(),
          signal,
        });
        const kept = (pieces: Buffer[]) =>
          this.#replays.keep(t, committed, req, { headers: res.headers, pieces, streamed: true });
        return { status: 200, headers: res.headers, body: keepingEvents(body, kept) };
      }
      try {
        const version = await this.#commit(t, turn, res, context, signal);
        // A pooled reply's buffers are reused once released: what is sent on is copied first.
        const body = res.release ? [Buffer.concat(res.clientBody)] : res.clientBody;
        this.#replays.keep(t, version, req, { headers: res.headers, pieces: body, streamed: false });
        return { status: 200, headers: res.headers, body };
      } finally {
        res.release?.();
      }
    });
  }

  /** Steps 4 and 5 of a turn, under the lock again: verify, store, then apply (unless the session moved on). */
  async #commit(
    t: Trajectory,
    turn: PreparedTurn,
    res: EngineCompletion,
    context: TurnContext,
    signal: CancelSignal | undefined,
  ): Promise<number | undefined> {
    return t.lock.run(async () => {
      if (t.closing || t.finished || (!turn.place && t.version !== turn.version)) {
        this.#log?.warn(
          { sessionId: t.id, closing: t.closing },
          "session changed while the engine answered; turn returned but not recorded",
        );
        return undefined;
      }
      if (t.tree) reholdParent(t, t.tree, turn.place!, this.#tree.maxNodes);
      const input = {
        promptIds: turn.promptIds,
        // A tree turn may continue another node than the latest checkpoint: all its ids are compared.
        copiedFrom: turn.place ? undefined : { version: turn.version, ids: turn.copied },
        completionIds: res.completionIds,
        messages: turn.messages.concat([res.message]), // exactly its messages, no spare slots: the session keeps it
        tools: turn.tools,
      };
      t.verify(input, this.#ctx.family.maxTrimTokens);
      // A caller that gave up (its client left, or a pause aborted the turn) gets no commit:
      // it never saw this reply, and will send the turn again.
      if (signal?.aborted) throw new UpstreamAbortedError({ cause: signal.reason });
      // Stored before it is applied or acknowledged: a failed write leaves the session as it was.
      const record = {
        timestamp: Date.now() / 1000,
        method: "POST",
        path: res.path,
        statusCode: 200,
        request: res.request,
        response: res.response,
        responseCrc: res.responseCrc,
        weightVersion: context.weightVersion ?? null,
        engineWeightVersion: res.engineWeightVersion,
        node: t.tree && nodeFields(t.tree, turn.place!, scanReplyFacts(res.response, t.tree.size).finishReason),
        resumed: res.resumed && { ...res.resumed, tokens: res.completionIds.length },
      };
      await this.#records.append(t.id, record, {
        index: t.tree?.size ?? t.assistantCount,
        completionIds: res.completionIds,
        assistant: res.message,
        conversation:
          res.requestHasConversation && !turn.adopted ? undefined : { messages: turn.messages, tools: turn.tools },
        clientApi: context.api === "messages" ? "messages" : undefined,
      });
      t.clientApi = context.api ?? "chat";
      const committed = { ...input, weightVersion: record.weightVersion, timestamp: record.timestamp };
      t.restore(committed);
      if (t.tree) addNode(t, t.tree, committed, record.node!, this.#tree);
      return t.version;
    });
  }

  /** POST /sessions/{id}/samples: the committed trajectory as one training sample (samples.ts). */
  async samples(sessionId: string, req: CoreRequest): Promise<CoreResponse> {
    return this.#guard(async () => {
      const t = this.#registry.get(sessionId);
      this.#idle?.touch(sessionId);
      const request = parseSampleRequest(req.body, req.query, req.headers);
      // Under the lock: turns and records from the same committed state.
      const encoded = await t.lock.run(async () => {
        if (t.closing) throw new SessionNotFoundError(sessionId, this.#registry.notFoundHint);
        const records = await this.#records.list(t.id);
        return t.tree
          ? encodeTreeSamples(this.#ctx, t, t.tree, records, request)
          : encodeSample(this.#ctx, t, records, request);
      });
      return { status: 200, headers: { "content-type": encoded.contentType }, body: encoded.body };
    });
  }

  /** GET /sessions/{id}/tree: the session's nodes as an outline (tree/tree-outline.ts). */
  async tree(sessionId: string): Promise<CoreResponse> {
    return this.#guard(async () => {
      const t = this.#registry.get(sessionId);
      return t.lock.run(async () => json(200, await outline(t, () => this.#records.list(t.id))));
    });
  }

  async proxy(sessionId: string, req: CoreRequest, signal?: CancelSignal): Promise<CoreResponse> {
    return this.#guard(() => this.#engine.proxy({ ...req, signal, routingKey: this.#registry.routingKey(sessionId) }));
  }

  async close(): Promise<void> {
    this.#idle?.close();
    await this.#engine.close();
    this.#replays.close();
    await this.#records.close();
  }

  /** Step 1 of a turn, under the lock: parse, force fields, plan the prompt, apply a rollback. */
  async #prepare(t: Trajectory, bytes: Buffer, api: ClientApi, limit?: number): Promise<PreparedTurn> {
    if (t.closing) throw new SessionNotFoundError(t.id, this.#registry.notFoundHint);
    if (t.finished) throw new SessionFinishedError(t.id);
    checkClientApi(t, api);
    const body = parseChatBody(bytes);
    const place =
      t.tree && placeTurn(t, t.tree, body.messages as ChatMessage[], this.#ctx.matcher, this.#tree.maxNodes);
    const tools = Array.isArray(body.tools) ? body.tools : undefined;
    const kwargs = this.#kwargs.of(body.chat_template_kwargs);
    const ctx = kwargs === this.#ctx.kwargs ? this.#ctx : { ...this.#ctx, kwargs };
    const plan = planPrompt(ctx, t, body.messages as ChatMessage[], tools);
    const { messages, adopted } = plan;
    // Before the rollback: a turn over its budget leaves the session as it was.
    const turns = plan.rollbackToTurns ?? t.assistantCount;
    const cap = checkBudget(t.budget, limit, plan.promptIds.length, turns);
    const capped = cap === undefined ? body : capMaxTokens(body, cap);
    if (plan.rollbackToTurns !== undefined) {
      this.#log?.info({ sessionId: t.id, from: t.assistantCount, to: plan.rollbackToTurns }, "rollback");
      await this.#records.truncate(t.id, plan.rollbackToTurns);
      t.rollbackTo(plan.rollbackToTurns);
    }
    const promptBytes = idsBytes(plan.promptIds);
    return {
      promptIds: plan.promptIds,
      promptBytes,
      messages: [...messages],
      tools,
      body: capped,
      clientBytes: capped === body ? bytes : Buffer.from(JSON.stringify(capped)),
      kwargs,
      version: t.version,
      copied: plan.copied ?? 0,
      adopted,
      place,
    };
  }

  #drift(t: Trajectory) {
    return driftOf(this.#ctx, t.messages, t.lastTools, t.currentIds);
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

/** Loads the tokenizer synchronously; the engine comes ready from the caller. */
export function createSessionCore(options: SessionCoreOptions): SessionCore {
  return new SessionCore(options);
}
