// The options of startSessionServer() and of `tito-server serve`, with their defaults
// and validation in one place, so the CLI and the embedding API cannot disagree.
import { existsSync, statSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { APPENDABLE_ROLES, FAMILY_NAMES, type TitoFamilyName } from "../../sessions/families/names.ts";
import type { MessageMatcher } from "../../sessions/index.ts";
import { closestName } from "./closest-name.ts";
import { InvalidOptionError } from "./errors.ts";

/** The engine APIs a worker speaks (engine/index.ts has the adapters; the host never loads them). */
export const ENGINE_APIS: readonly string[] = ["sglang-chat", "sglang-generate", "vllm-completions"];

/** sessions/message-compare.ts MESSAGE_MATCHERS (host/ takes only types from sessions/). */
export const MESSAGE_MATCHERS: readonly MessageMatcher[] = ["strict", "loose", "role-content"];

export interface SessionServerOptions {
  /** Listen address of the HTTP front door. Default "127.0.0.1". */
  host?: string;
  /** Listen port; 0 picks a free one. Default 8080 (the CLI) — the embedding API defaults to 0. */
  port?: number;
  /** Worker processes (shards). Default: the available CPU cores, at most 8. */
  workers?: number;
  /** SGLang-compatible engine URL. When absent, the built-in simulated engine is started. */
  engineUrl?: string;
  /** The engine API: "sglang-chat" (default), "sglang-generate" or "vllm-completions". */
  engineApi?: "sglang-chat" | "sglang-generate" | "vllm-completions";
  /** The served model name every engine request carries (vllm-completions); default: the first of the engine's GET /v1/models. */
  engineModel?: string;
  /** "on" (default): the tokenizer folder's generation_config.json fills in temperature/top_p/top_k the client left unset, on every engine API; "off": the engine's own defaults. */
  generationConfig?: "on" | "off";
  /** The prefix-cache salt of engine requests (docs/rl-loop.md): "session" (default), "turn" or "off"; none while no weight version is set. */
  cacheSalt?: "off" | "turn" | "session";
  /** Headers every engine request carries the session's routing key in (docs/engines.md). Default X-SMG-Routing-Key, X-Session-ID; [] = none. */
  engineSessionHeaders?: string[];
  /** "retry" (default): an engine-aborted generation is a retryable 503, nothing committed; "resume": continued after the weight update (docs/rl-loop.md). */
  onEngineAbort?: "retry" | "resume";
  /** Hugging Face tokenizer folder. Default: the bundled Qwen3 folder. */
  tokenizerDir?: string;
  /** TITO model family (docs/models.md); default detected from the tokenizer. */
  titoFamily?: TitoFamilyName;
  chatTemplateKwargs?: Record<string, unknown>;
  /** Roles a later turn may append. Default: the family's (docs/models.md). */
  allowedAppendRoles?: string[];
  /** How a turn's history is matched against the stored messages (docs/agents.md). Default "strict". */
  messageMatcher?: MessageMatcher;
  routingReplay?: boolean;
  indexerReplay?: boolean;
  /** Restarts of one child allowed within restartWindowMs before the tree fails. 0 = fail fast. Default 3. */
  maxRestarts?: number;
  restartWindowMs?: number;
  /** Backoff before the first restart, doubling up to 10 s. Default 250. */
  restartBackoffMs?: number;
  /** Also append every supervision event to this JSONL file. */
  eventsFile?: string;
  /** Per upstream request. Default 600000. */
  engineTimeoutMs?: number;
  /** A connection to the engine not up within this is a 502 "engine unreachable". Default 10000. */
  engineConnectTimeoutMs?: number;
  /** Require `Authorization: Bearer <token>` on every route but /health. */
  authToken?: string;
  /** Engine paths a session token may GET through its session's proxy (docs/security.md). Default /v1/models, /health, /get_model_info. */
  agentProxyAllow?: string[];
  /** pino level of the children's logs (stderr). Default "info". */
  logLevel?: string;
  /** Largest request body accepted (413 above). Default 64 MiB. */
  bodyLimit?: number;
  /** How long a request for a restarting shard waits for the new worker. Default 10000. */
  shardWaitMs?: number;
  /** How long a chat turn waits at the rollout door while paused (POST /admin/pause) before a retryable 503. Default 600000. */
  holdTimeoutMs?: number;
  /** Sessions idle longer than this many seconds are deleted (journalled like a DELETE); later requests get 404 `session expired`. 0 = never. Default 0. */
  sessionIdleTtlS?: number;
  /** A streamed Anthropic Messages turn whose engine has not answered within this starts its events and sends a `ping` this often until it does. Default 5000. */
  anthropicPingMs?: number;
  /** A session's token budget (prompt plus completion) when its create body gives none; 0 = none. Default 0. */
  maxSessionTokens?: number;
  /** A session's turn budget when its create body gives none; 0 = none. Default 0. */
  maxSessionTurns?: number;
  /** The trajectory mode of a session whose create body gives none (docs/trajectories.md). Default "linear". */
  trajectory?: "linear" | "tree";
  /** Nodes a tree-mode session may hold; a turn past it is a 409 TITO_ERR_TRAJECTORY_NODES. Default 1024. */
  maxTrajectoryNodes?: number;
  /** Chat turns the instance sends on at once; more wait at the router's door in arrival order. 0 = unlimited. Default 0. */
  maxInflightTurns?: number;
  /** Turns that may wait at the door (for --max-inflight-turns, or held by a pause); beyond, a 429. 0 = unlimited. Default 0. */
  maxQueuedTurns?: number;
  /** SIGTERM -> SIGKILL grace when stopping a child. Default 5000. */
  shutdownGraceMs?: number;
  /** Give up starting after this long. Default 120000. */
  startTimeoutMs?: number;
  /** Called with every supervision event from the very first one (startup included). */
  onEvent?: (event: import("../../actors/index.ts").SupervisionEvent) => void;
  /** Simulated generation latency of the built-in engine (only without engineUrl). */
  simLatencyMs?: number;
  /** Simulated time per generated token of the built-in engine (streamed replies come at this pace). */
  simTokenMs?: number;
  /** "journal" (default): each shard appends its sessions to a journal and a restarted worker replays it; "memory": lost with the worker. */
  durability?: "journal" | "memory";
  /** Where shard journals live (one subdirectory per shard); kept. Default: a fresh directory under the OS temp dir, removed on clean shutdown. */
  dataDir?: string;
  /** When journal writes are fsynced: "every" entry before its ack, "interval" (default, every 100 ms), or "never" (the OS decides). */
  fsync?: "every" | "interval" | "never";
  /**
   * The CPU priority (nice value, 0-19) of each worker's records streamer, the helper process
   * that writes records GETs read from the journal; higher yields more to chat turns. Default 10.
   */
  recordsNice?: number;
  /**
   * Whether each worker keeps a records streamer (default true). Off, workers write records
   * GETs themselves, at their own priority: about 45-60 MiB less memory per worker.
   */
  recordsStreamer?: boolean;
  /**
   * How long a worker's records streamer lives on with no records GET in flight before it
   * exits (the next GET starts one). Default 30000 ms.
   */
  recordsIdleMs?: number;
  /**
   * Records GETs whose body is at least this many bytes are handed off: the router passes
   * the client's socket to the worker, which writes the body itself (docs/architecture.md,
   * "The records handoff"). Smaller bodies are relayed through the router, which costs
   * less than the handoff's two socket passes. 0 hands off every one. Default 1048576.
   */
  recordsHandoffMinBytes?: number;
}

export type ResolvedOptions = Required<
  Omit<
    SessionServerOptions,
    | "engineUrl"
    | "engineModel"
    | "tokenizerDir"
    | "titoFamily"
    | "allowedAppendRoles"
    | "eventsFile"
    | "authToken"
    | "onEvent"
    | "dataDir"
    | "anthropicPingMs"
  >
> &
  Pick<
    SessionServerOptions,
    | "engineUrl"
    | "engineModel"
    | "tokenizerDir"
    | "titoFamily"
    | "allowedAppendRoles"
    | "eventsFile"
    | "authToken"
    | "onEvent"
    | "dataDir"
    | "anthropicPingMs"
  >;

/**
 * Every option's name: a typo (`engineURL`) must not start the simulated engine silently.
 * `satisfies` keeps the list complete as options are added.
 */
const OPTION_NAMES: readonly string[] = Object.keys({
  host: 1,
  port: 1,
  workers: 1,
  engineUrl: 1,
  engineApi: 1,
  engineModel: 1,
  generationConfig: 1,
  cacheSalt: 1,
  engineSessionHeaders: 1,
  onEngineAbort: 1,
  tokenizerDir: 1,
  titoFamily: 1,
  chatTemplateKwargs: 1,
  allowedAppendRoles: 1,
  messageMatcher: 1,
  routingReplay: 1,
  indexerReplay: 1,
  maxRestarts: 1,
  restartWindowMs: 1,
  restartBackoffMs: 1,
  eventsFile: 1,
  engineTimeoutMs: 1,
  engineConnectTimeoutMs: 1,
  authToken: 1,
  agentProxyAllow: 1,
  logLevel: 1,
  bodyLimit: 1,
  shardWaitMs: 1,
  holdTimeoutMs: 1,
  sessionIdleTtlS: 1,
  anthropicPingMs: 1,
  maxSessionTokens: 1,
  maxSessionTurns: 1,
  trajectory: 1,
  maxTrajectoryNodes: 1,
  maxInflightTurns: 1,
  maxQueuedTurns: 1,
  shutdownGraceMs: 1,
  startTimeoutMs: 1,
  onEvent: 1,
  simLatencyMs: 1,
  simTokenMs: 1,
  durability: 1,
  dataDir: 1,
  fsync: 1,
  recordsNice: 1,
  recordsStreamer: 1,
  recordsIdleMs: 1,
  recordsHandoffMinBytes: 1,
} satisfies Record<keyof SessionServerOptions, 1>);

/** The headers a session's routing key goes in by default: SGLang's model gateway's and vLLM's router's (docs/engines.md). */
export const DEFAULT_SESSION_HEADERS: readonly string[] = ["X-SMG-Routing-Key", "X-Session-ID"];
/** An HTTP field name (RFC 9110 5.1: a token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Headers the upstream client sets or drops itself (engine/upstream.ts): never a routing key's. */
const RESERVED_HEADERS = new Set([
  "host",
  "content-length",
  "content-type",
  "transfer-encoding",
  "connection",
  "authorization",
  "accept",
  "accept-encoding",
]);

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

/** Records bodies from this size on are handed off to the worker; smaller ones are relayed (recordsHandoffMinBytes). */
export const RECORDS_HANDOFF_MIN_BYTES = 1 << 20;

/** The default worker count: one per available core, at most 8. */
export const defaultWorkers = (): number => Math.min(availableParallelism(), 8);

export interface ResolveContext {
  /** The default port: 8080 for the CLI, 0 when embedding. */
  port: number;
  /** How an error names an option: the CLI names its flag (`--restart-window-ms`). Default: the option's name. */
  label?: (option: keyof SessionServerOptions) => string;
}

export function resolveOptions(options: SessionServerOptions, context: ResolveContext): ResolvedOptions {
  const label = context.label ?? ((option) => option);
  for (const key of Object.keys(options))
    if (!OPTION_NAMES.includes(key))
      throw new InvalidOptionError(
        `unknown option ${JSON.stringify(key)}: did you mean ${JSON.stringify(closestName(key, OPTION_NAMES))}? (docs/embedding.md lists every option)`,
      );
  const int = (option: keyof SessionServerOptions, value: number, min: number, max = Number.MAX_SAFE_INTEGER) => {
    if (!Number.isInteger(value) || value < min || value > max)
      throw new InvalidOptionError(
        max === Number.MAX_SAFE_INTEGER
          ? `${label(option)} must be an integer of at least ${min}, got ${value}`
          : `${label(option)} must be an integer between ${min} and ${max}, got ${value}`,
      );
    return value;
  };
  const oneOf = (option: keyof SessionServerOptions, value: unknown, allowed: readonly string[]) => {
    if (!allowed.includes(value as string))
      throw new InvalidOptionError(
        `${label(option)} must be one of ${allowed.join(", ")}, got ${JSON.stringify(value)}`,
      );
  };
  const resolved: ResolvedOptions = {
    host: options.host ?? "127.0.0.1",
    port: int("port", options.port ?? context.port, 0, 65535),
    workers: int("workers", options.workers ?? defaultWorkers(), 1, 256),
    engineUrl: options.engineUrl,
    engineApi: options.engineApi ?? "sglang-chat",
    engineModel: options.engineModel,
    generationConfig: options.generationConfig ?? "on",
    cacheSalt: options.cacheSalt ?? "session",
    engineSessionHeaders: options.engineSessionHeaders ?? [...DEFAULT_SESSION_HEADERS],
    onEngineAbort: options.onEngineAbort ?? "retry",
    tokenizerDir: options.tokenizerDir,
    titoFamily: options.titoFamily,
    chatTemplateKwargs: options.chatTemplateKwargs ?? {},
    allowedAppendRoles: options.allowedAppendRoles,
    messageMatcher: options.messageMatcher ?? "strict",
    routingReplay: options.routingReplay ?? false,
    indexerReplay: options.indexerReplay ?? false,
    maxRestarts: int("maxRestarts", options.maxRestarts ?? 3, 0),
    restartWindowMs: int("restartWindowMs", options.restartWindowMs ?? 60_000, 1),
    restartBackoffMs: int("restartBackoffMs", options.restartBackoffMs ?? 250, 0),
    eventsFile: options.eventsFile,
    engineTimeoutMs: int("engineTimeoutMs", options.engineTimeoutMs ?? 600_000, 1),
    engineConnectTimeoutMs: int("engineConnectTimeoutMs", options.engineConnectTimeoutMs ?? 10_000, 1),
    authToken: options.authToken,
    agentProxyAllow: options.agentProxyAllow ?? ["/v1/models", "/health", "/get_model_info"],
    logLevel: options.logLevel ?? "info",
    bodyLimit: int("bodyLimit", options.bodyLimit ?? 64 * 1024 * 1024, 1),
    shardWaitMs: int("shardWaitMs", options.shardWaitMs ?? 10_000, 0),
    holdTimeoutMs: int("holdTimeoutMs", options.holdTimeoutMs ?? 600_000, 1),
    sessionIdleTtlS: int("sessionIdleTtlS", options.sessionIdleTtlS ?? 0, 0),
    // Unset: the worker's default (sessions/messages-turn.ts, DEFAULT_PING_MS).
    anthropicPingMs:
      options.anthropicPingMs === undefined ? undefined : int("anthropicPingMs", options.anthropicPingMs, 1),
    maxSessionTokens: int("maxSessionTokens", options.maxSessionTokens ?? 0, 0),
    maxSessionTurns: int("maxSessionTurns", options.maxSessionTurns ?? 0, 0),
    trajectory: options.trajectory ?? "linear",
    maxTrajectoryNodes: int("maxTrajectoryNodes", options.maxTrajectoryNodes ?? 1024, 1),
    maxInflightTurns: int("maxInflightTurns", options.maxInflightTurns ?? 0, 0),
    maxQueuedTurns: int("maxQueuedTurns", options.maxQueuedTurns ?? 0, 0),
    shutdownGraceMs: int("shutdownGraceMs", options.shutdownGraceMs ?? 5_000, 0),
    startTimeoutMs: int("startTimeoutMs", options.startTimeoutMs ?? 120_000, 1),
    simLatencyMs: int("simLatencyMs", options.simLatencyMs ?? 0, 0),
    simTokenMs: int("simTokenMs", options.simTokenMs ?? 0, 0),
    onEvent: options.onEvent,
    durability: options.durability ?? "journal",
    dataDir: options.dataDir,
    fsync: options.fsync ?? "interval",
    recordsNice: int("recordsNice", options.recordsNice ?? 10, 0, 19),
    recordsStreamer: options.recordsStreamer ?? true,
    recordsIdleMs: int("recordsIdleMs", options.recordsIdleMs ?? 30_000, 1),
    recordsHandoffMinBytes: int(
      "recordsHandoffMinBytes",
      options.recordsHandoffMinBytes ?? RECORDS_HANDOFF_MIN_BYTES,
      0,
    ),
  };
  oneOf("engineApi", resolved.engineApi, ENGINE_APIS);
  oneOf("onEngineAbort", resolved.onEngineAbort, ["retry", "resume"]);
  oneOf("generationConfig", resolved.generationConfig, ["on", "off"]);
  oneOf("cacheSalt", resolved.cacheSalt, ["off", "turn", "session"]);
  for (const name of resolved.engineSessionHeaders)
    if (typeof name !== "string" || !HEADER_NAME.test(name) || RESERVED_HEADERS.has(name.toLowerCase()))
      throw new InvalidOptionError(
        `${label("engineSessionHeaders")} entries are HTTP header names the server does not set itself, got ${JSON.stringify(name)}`,
      );
  if (resolved.engineModel !== undefined && resolved.engineModel.trim() === "")
    throw new InvalidOptionError(`${label("engineModel")} must not be empty`);
  oneOf("durability", resolved.durability, ["journal", "memory"]);
  oneOf("fsync", resolved.fsync, ["every", "interval", "never"]);
  if (resolved.dataDir !== undefined && resolved.dataDir.trim() === "")
    throw new InvalidOptionError(`${label("dataDir")} must not be empty`);
  if (resolved.titoFamily !== undefined) oneOf("titoFamily", resolved.titoFamily, FAMILY_NAMES);
  oneOf("logLevel", resolved.logLevel, LOG_LEVELS);
  if (resolved.engineUrl) {
    try {
      const url = new URL(resolved.engineUrl);
      if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("not http(s)");
    } catch {
      throw new InvalidOptionError(`${label("engineUrl")} must be an http(s) URL, got ${resolved.engineUrl}`);
    }
  }
  oneOf("messageMatcher", resolved.messageMatcher, MESSAGE_MATCHERS);
  oneOf("trajectory", resolved.trajectory, ["linear", "tree"]);
  // What the host can check before a worker is spawned, it checks: a worker that finds no
  // tokenizer folder would fail its start anyway (a configuration error: not restarted).
  if (resolved.tokenizerDir !== undefined) {
    const dir = resolved.tokenizerDir;
    if (!existsSync(dir) || !statSync(dir).isDirectory())
      throw new InvalidOptionError(
        `${label("tokenizerDir")} must be a tokenizer folder, got ${JSON.stringify(dir)} (no such directory)`,
      );
    if (!existsSync(join(dir, "tokenizer.json")))
      throw new InvalidOptionError(`${label("tokenizerDir")} ${JSON.stringify(dir)} has no tokenizer.json`);
  }
  if (resolved.allowedAppendRoles?.length === 0)
    throw new InvalidOptionError(`${label("allowedAppendRoles")} must name at least one role`);
  // A role no family appends fails every worker's start: refused here, before any is spawned.
  for (const role of resolved.allowedAppendRoles ?? [])
    if (!APPENDABLE_ROLES.includes(role))
      throw new InvalidOptionError(
        `${label("allowedAppendRoles")} takes ${APPENDABLE_ROLES.join(", ")}; got ${JSON.stringify(role)}`,
      );
  for (const path of resolved.agentProxyAllow)
    if (!path.startsWith("/") || path.includes("?"))
      throw new InvalidOptionError(
        `${label("agentProxyAllow")} entries are engine paths starting with "/" and no query, got ${JSON.stringify(path)}`,
      );
  return resolved;
}
