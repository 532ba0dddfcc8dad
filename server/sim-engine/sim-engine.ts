// The simulated engine: a Fastify app that answers the three engine APIs tito-server
// speaks, from one deterministic generator over the real tokenizer, plus `GET /health`
// and `GET /v1/models`. It stands in for the GPU engine in tests, `npm start` and
// benchmarks.
//
// The model writes in a TITO family's format (`titoFamily`, default: detected from the
// tokenizer folder) and stops at the family's first stop token (sim-engine-model.ts).
//
// Routes:
// - `POST /v1/chat/completions`, the patched-SGLang API: reads `input_ids` (decoded with
//   the tokenizer) or renders `messages`, then replies (sim-engine-reply.ts): plain text,
//   or a call of the first tool when `tools` are given and the last turn is not a tool
//   result, written with the family's formatCompletion and parsed back with its
//   parseCompletion, as SGLang runs its parsers (a family with no call format answers in
//   text).
// - `POST /generate`, stock SGLang's native API (sim-engine-generate.ts), and
//   `POST /v1/completions`, stock vLLM's completions API (sim-engine-completions.ts): the
//   same choice made on the decoded prompt ids, whose rendered tools it reads, written
//   as a real Qwen3 completion (sim-engine-completion.ts), ended by the family's stop token.
// Modes:
// - default: as above.
// - `rawReplies` (benchmarks): the generation routes answer from the request's raw bytes,
//   never parsed, with what the given replier builds (bench/sim-engine-prebuilt.ts).
// `routed_experts` (synthetic base64 int32 expert ids, one row of layers × top-k per token
// of prompt + completion but the last, as SGLang returns it; or `routedExpertsBytes` bytes
// when set) is added to `meta_info` on the SGLang routes when the request sets
// `return_routed_experts: true` or `alwaysRoutedExperts`. Each route answers errors in its engine's error shape.
// It never echoes request headers; the one state it keeps across requests is its prefix cache
// (sim-engine-cache.ts), which reports hits as the engines do.
import { setTimeout as sleep } from "node:timers/promises";
import type { RawApi, RawReplies } from "./raw-replies.ts";
import Fastify, { type FastifyInstance, type FastifyPluginAsync, type FastifyReply } from "fastify";
import AjvCompiler from "@fastify/ajv-compiler";
import type { ChatMessage } from "../../sessions/chat-template.ts";
import { bundledQwen3Dir, loadTokenizerFolder, type TokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { responseObject } from "./sim-engine-reply.ts";
import { buildReply, chatFacts, requestKwargs, simModel, type SimModel } from "./sim-engine-model.ts";
import {
  DEFAULT_ROUTING_SHAPE,
  RoutedExpertsPayload,
  responseChunks,
  routedExpertsSize,
  type RoutingShape,
} from "./sim-engine-payload.ts";
import { promptIdsOf, stopList } from "./sim-engine-completion.ts";
import { AbortBoard, markAborted, updateRoutes } from "./sim-engine-abort.ts";
import { CacheReport, sglangSaltOf, vllmSaltOf } from "./sim-engine-cache.ts";
import { errorShape, send, sendStream, tokensTime } from "./sim-engine-http.ts";
import { modelList, refuseChat, refuseGenerateOverflow, sglangOverflow } from "./sim-engine-context.ts";
import { chatStream, completionsStream, generateStream, type StreamPacing } from "./sim-engine-stream.ts";
import { generateError, generateResponse, generateSchema, type GenerateBody } from "./sim-engine-generate.ts";
import {
  checkCompletions,
  completionsError,
  completionsResponse,
  completionsSchema,
  type CompletionsBody,
} from "./sim-engine-completions.ts";

export type { RawApi, RawReplier, RawReplies } from "./raw-replies.ts";

export interface SimEngineOptions {
  tokenizerDir?: string; // default bundledQwen3Dir()
  /** An already loaded folder (skips the load); wins over tokenizerDir. */
  tokenizerFolder?: TokenizerFolder;
  /** The TITO family whose format replies are written in (default: detected from the folder). */
  titoFamily?: string;
  host?: string; // default 127.0.0.1
  port?: number; // default 0
  latencyMs?: number; // simulated generation time per chat request, default 0
  /** An aborted request keeps this many generated tokens (fewer than it has; default half): sim-engine-abort.ts. */
  abortAtToken?: number;
  /** Layers of the simulated MoE: each token's routed_experts row is layers × top-k ids (default 48). */
  routedExpertsLayers?: number;
  /** Experts per token per layer (default 8). */
  routedExpertsTopK?: number;
  /**
   * A fixed routed_experts size in bytes (before base64) instead of the per-token shape:
   * for tests and load runs that need a given size. Not a whole number of rows, so
   * POST /samples refuses it.
   */
  routedExpertsBytes?: number;
  alwaysRoutedExperts?: boolean;
  logger?: boolean; // fastify logger, default false
  /** Replies from raw request bytes, for benchmarks (bench/sim-engine-prebuilt.ts): no parse, no tokenizer work. */
  rawReplies?: RawReplies;
  /** Served model name (default "tito-sim"). */
  model?: string;
  /**
   * Awaited after a generation request (any of the three routes) is counted and before
   * it is answered (after the latency timer). Tests use it as a gate ("the request is at
   * the engine now") and as a fault: a throw is answered as the route's error (its
   * `statusCode`, else 500), a promise that never settles is an engine that hangs.
   * Gets the parsed body (the raw bytes in pre-built mode) and the route.
   */
  beforeReply?: (body: unknown, route: SimRoute) => void | Promise<void>;
  /**
   * Simulated time per generated token (default 0): a streamed reply (`stream: true`) sends a
   * chunk per token at this pace, and one that is not streamed comes after all its tokens.
   */
  tokenMs?: number;
  /** `/generate` streams only what is new in each chunk (SGLang's `--incremental-streaming-output`). */
  incrementalStreaming?: boolean;
  /**
   * With incrementalStreaming: SGLang before PR #21583 (2026-03-28), whose incremental chunks
   * held new text and ids but every logprob entry so far.
   */
  cumulativeLogprobs?: boolean;
  /** The context length GET /v1/models states and every route enforces as its engine does (default 40960, Qwen3's). */
  maxModelLen?: number;
  /** GET /v1/models states no max_model_len (an engine, or a router in front of it, that does not say it). */
  modelsWithoutMaxModelLen?: boolean;
  /**
   * /v1/completions with `max_tokens: null`: "500" as released vLLM (it generates, then fails
   * an assert: vLLM issue #19862; the default, the strictest), or "16" as newer vLLM.
   */
  vllmNullMaxTokens?: "500" | "16";
  /** /v1/completions as vLLM before 0.10.2: no `token_ids` (ids only as "token_id:N" logprob tokens). */
  vllmNoTokenIds?: boolean;
  /** /v1/completions adds `routed_experts` as vLLM (`--enable-return-routed-experts`): base64 .npy of this dtype. */
  vllmRoutedExperts?: "uint8" | "uint16" | "int32";
  /** Awaited before each chunk of a streamed reply (sim-engine-stream.ts); a throw fails the stream there. */
  onStreamChunk?: StreamPacing["onChunk"];
  /** A generation reply's connection closed: `whole` when all of it was written (false: the client left early). */
  onReplyClosed?: (route: SimRoute, whole: boolean) => void;
  /**
   * The token-level routes (/generate, /v1/completions) open the completion with a
   * `<think>` block, unless the prompt already closed one (default false, like the chat
   * route, which never reasons).
   */
  reasoning?: boolean;
  /** Keep a prefix cache and report its hits (sim-engine-cache.ts); default off: replies as without one. */
  prefixCache?: boolean;
  /** SGLang's `meta_info.weight_version` on its routes (its `--weight-version`); unset: not reported. */
  weightVersion?: string;
  /** /v1/completions reports `usage.prompt_tokens_details.cached_tokens`, as vLLM's `--enable-prompt-tokens-details`. */
  promptTokensDetails?: boolean;
}

/** The generation routes the engine serves. */
export type SimRoute = "/v1/chat/completions" | "/generate" | "/v1/completions";

export interface SimEngine {
  url: string;
  port: number;
  close(): Promise<void>;
  /** Generation requests received so far, all routes (counted on arrival, before latency and beforeReply). */
  readonly requests: number;
}

interface ChatBody {
  messages?: ChatMessage[];
  input_ids?: number[];
  tools?: unknown[] | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean | null } | null;
  return_routed_experts?: boolean | null;
  chat_template_kwargs?: Record<string, unknown> | null;
}

const chatSchema = {
  body: {
    type: "object",
    properties: {
      messages: {
        type: "array",
        items: { type: "object", required: ["role"], properties: { role: { type: "string" } } },
      },
      input_ids: { type: "array", items: { type: "integer", minimum: 0 } },
      tools: { type: ["array", "null"] },
      max_tokens: { type: ["integer", "null"], minimum: 0 },
      max_completion_tokens: { type: ["integer", "null"], minimum: 0 },
      stream: { type: ["boolean", "null"] },
      chat_template_kwargs: { type: ["object", "null"] },
    },
  },
};

interface EngineContext {
  folder: TokenizerFolder;
  model: SimModel;
  options: SimEngineOptions;
  modelName: string;
  counter: { requests: number };
}

const engineRoutes: FastifyPluginAsync<EngineContext> = async (app, ctx) => {
  const { folder, options, modelName: model, counter } = ctx;
  const pacing: StreamPacing = { tokenMs: options.tokenMs ?? 0, onChunk: options.onStreamChunk };
  // The hook hears when a generation reply's connection closes, and whether all of it was written.
  const watch = (reply: FastifyReply, route: SimRoute) => {
    const hook = options.onReplyClosed;
    if (hook) reply.raw.once("close", () => hook(route, reply.raw.writableFinished));
  };
  const payload = new RoutedExpertsPayload();
  const shape: RoutingShape = {
    layers: options.routedExpertsLayers ?? DEFAULT_ROUTING_SHAPE.layers,
    topK: options.routedExpertsTopK ?? DEFAULT_ROUTING_SHAPE.topK,
  };
  const routedBytes = (promptTokens: number, completionTokens: number) =>
    routedExpertsSize(shape, promptTokens, completionTokens, options.routedExpertsBytes);
  const { stopId } = ctx.model;

  // The chat route's errors (and the raw-reply mode's) keep the engine's original `{error}` shape.
  app.setErrorHandler(errorShape((message) => ({ error: message })));
  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({ error: `not found: ${request.method} ${request.url}` });
  });

  app.get("/health", async () => ({ status: "ok" }));
  const maxModelLen = options.maxModelLen ?? 40960;
  app.get("/v1/models", async () => modelList(model, options.modelsWithoutMaxModelLen ? undefined : maxModelLen));
  const aborts = new AbortBoard();
  const report = new CacheReport(options); // the prefix cache and the weight version (sim-engine-cache.ts)
  updateRoutes(app, aborts); // /abort_request, and the weight updates that abort

  if (options.rawReplies) {
    const replier = options.rawReplies(folder, model);
    // Raw bytes: this mode never parses a request body.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    const routes: Array<[SimRoute, RawApi]> = [
      ["/v1/chat/completions", "chat"],
      ["/generate", "generate"],
      ["/v1/completions", "completions"],
    ];
    for (const [route, api] of routes) {
      app.post(route, async (request, reply) => {
        counter.requests++;
        const body = request.body as Buffer;
        if (options.latencyMs) await sleep(options.latencyMs);
        await options.beforeReply?.(body, route);
        const built = replier.reply(api, body);
        return send(reply, built.chunks, built.length);
      });
    }
    return;
  }

  app.post("/v1/chat/completions", { schema: chatSchema }, async (request, reply) => {
    counter.requests++;
    watch(reply, "/v1/chat/completions");
    const body = (request.body ?? {}) as ChatBody;
    const facts = chatFacts(ctx.model, body);
    const salt = sglangSaltOf(body as Record<string, unknown>);
    const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? undefined;
    const overflow = sglangOverflow(facts.ids.length, maxTokens, maxModelLen);
    if (overflow !== undefined) return refuseChat(reply, overflow);
    const ticket = aborts.enter((body as { rid?: unknown }).rid);
    try {
      if (options.latencyMs) await sleep(options.latencyMs);
      await options.beforeReply?.(body, "/v1/chat/completions");
    } finally {
      aborts.leave(ticket);
    }
    const simReply = buildReply(ctx.model, facts, requestKwargs(ctx.model, body), maxTokens);
    const withR3 = options.alwaysRoutedExperts === true || body.return_routed_experts === true;
    const response = responseObject(model, facts.ids.length, simReply, stopId, withR3);
    report.chat(response, salt, facts.ids, simReply.completionIds);
    if (ticket.aborted) markAborted("/v1/chat/completions", response, options.abortAtToken);
    if (body.stream) {
      const includeUsage = body.stream_options?.include_usage === true;
      const events = chatStream(folder, { response, completionIds: simReply.completionIds, includeUsage }, pacing);
      return sendStream(reply, events);
    }
    await tokensTime(options, simReply.completionIds.length);
    const size = routedBytes(facts.ids.length, simReply.completionIds.length);
    return send(reply, responseChunks(response, payload, size));
  });

  const reasoning = options.reasoning === true;
  app.post(
    "/generate",
    { schema: generateSchema, errorHandler: errorShape((message) => generateError(message)) },
    async (request, reply) => {
      counter.requests++;
      watch(reply, "/generate");
      const body = (request.body ?? {}) as GenerateBody;
      const refused = refuseGenerateOverflow(reply, body, maxModelLen);
      if (refused) return refused;
      const withRoutedExperts = options.alwaysRoutedExperts === true || body.return_routed_experts === true;
      const salt = sglangSaltOf(body as Record<string, unknown>);
      const response = generateResponse(folder, body, { reasoning, withRoutedExperts, stopId });
      const promptIds = promptIdsOf(folder, body.input_ids ?? body.text, "`input_ids` or `text`");
      report.generate(response, salt, promptIds);
      const ticket = aborts.enter(body.rid);
      try {
        if (options.latencyMs) await sleep(options.latencyMs);
        await options.beforeReply?.(body, "/generate");
      } finally {
        aborts.leave(ticket);
      }
      if (ticket.aborted) markAborted("/generate", response, options.abortAtToken);
      const meta = response.meta_info as { prompt_tokens: number; completion_tokens: number };
      const size = routedBytes(meta.prompt_tokens, meta.completion_tokens);
      if (body.stream) {
        const keepSpecial = body.sampling_params?.skip_special_tokens === false;
        const input = {
          response,
          keepSpecial,
          incremental: options.incrementalStreaming === true,
          cumulativeLogprobs: options.cumulativeLogprobs === true,
          payload,
          routedBytes: size,
        };
        return sendStream(reply, generateStream(folder, input, pacing));
      }
      await tokensTime(options, (response.output_ids as number[]).length);
      return send(reply, responseChunks(response, payload, size));
    },
  );

  app.post(
    "/v1/completions",
    { schema: completionsSchema, errorHandler: errorShape(completionsError) },
    async (request, reply) => {
      counter.requests++;
      watch(reply, "/v1/completions");
      const body = (request.body ?? {}) as CompletionsBody;
      checkCompletions(body, { model, maxModelLen, nullMaxTokens: options.vllmNullMaxTokens ?? "500" });
      const noTokenIds = options.vllmNoTokenIds;
      const routedExperts = options.vllmRoutedExperts && { dtype: options.vllmRoutedExperts, ...shape };
      const salt = vllmSaltOf(body as Record<string, unknown>);
      const response = completionsResponse(folder, body, { model, reasoning, stopId, noTokenIds, routedExperts });
      const promptIds = promptIdsOf(folder, body.prompt, "`prompt`");
      report.completions(response, salt, promptIds);
      const ticket = aborts.enter(undefined);
      try {
        if (options.latencyMs) await sleep(options.latencyMs);
        await options.beforeReply?.(body, "/v1/completions");
      } finally {
        aborts.leave(ticket);
      }
      if (ticket.aborted) markAborted("/v1/completions", response, options.abortAtToken);
      // Released vLLM generates for a null max_tokens, then fails building the reply (issue #19862).
      if (body.max_tokens === null && (options.vllmNullMaxTokens ?? "500") === "500")
        return reply.code(500).send(completionsError("AssertionError: max_tokens is None", 500));
      if (body.stream) {
        const input = {
          response,
          promptIds,
          keepSpecial: body.skip_special_tokens === false,
          stop: stopList(body.stop, "stop"),
          includeUsage: body.stream_options?.include_usage === true,
        };
        return sendStream(reply, completionsStream(folder, input, pacing));
      }
      await tokensTime(options, (response.usage as { completion_tokens: number }).completion_tokens);
      return send(reply, [Buffer.from(JSON.stringify(response), "utf8")]);
    },
  );
};

/** Fastify's default validators, one Ajv for every engine of the process, not one per app (~70 ms each). */
const sharedValidators = AjvCompiler();

/** The engine's Fastify app, not listening (for `app.inject()` or a custom listen). */
export function buildSimEngineApp(options: SimEngineOptions = {}, counter = { requests: 0 }): FastifyInstance {
  const folder = options.tokenizerFolder ?? loadTokenizerFolder(options.tokenizerDir ?? bundledQwen3Dir());
  // Bodies of 100+ MiB (long histories, big tool results) must be accepted.
  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: 1024 * 1024 * 1024,
    schemaController: { compilersFactory: { buildValidator: sharedValidators } },
  });
  const model = simModel(folder, options.titoFamily);
  app.register(engineRoutes, { folder, model, options, modelName: options.model ?? "tito-sim", counter });
  return app;
}

export async function startSimEngine(options: SimEngineOptions = {}): Promise<SimEngine> {
  const counter = { requests: 0 };
  const app = buildSimEngineApp(options, counter);
  const host = options.host ?? "127.0.0.1";
  try {
    await app.listen({ host, port: options.port ?? 0 });
  } catch (err) {
    await app.close();
    throw err;
  }
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : (options.port ?? 0);
  const urlHost = host.includes(":") ? `[${host}]` : host;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    get requests() {
      return counter.requests;
    },
    close() {
      closing ??= app.close();
      return closing;
    },
  };
}
