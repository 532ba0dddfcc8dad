// The options of startSessionServer() and of `tito-server serve`, with their defaults
// and validation in one place, so the CLI and the embedding API cannot disagree.
import type { TitoFamilyName } from "../../sessions/index.ts";
import { InvalidOptionError } from "./errors.ts";

/** The engine APIs a worker speaks (engine/index.ts has the adapters; the host never loads them). */
export const ENGINE_APIS: readonly string[] = ["sglang-chat", "sglang-generate", "vllm-completions"];

/** sessions/families/family.ts FAMILY_NAMES (host/ takes only types from sessions/; a test keeps them equal). */
export const TITO_FAMILIES: readonly TitoFamilyName[] = [
  "default",
  "qwen3",
  "qwennext",
  "qwen35",
  "nemotron3",
  "glm47",
  "kimi25",
  "kimi26",
  "minimax_m25",
  "minimax_m27",
  "deepseekv32",
  "deepseekv4",
  "inkling",
  "llama3",
  "gemma3",
];

export interface SessionServerOptions {
  /** Listen address of the HTTP front door. Default "127.0.0.1". */
  host?: string;
  /** Listen port; 0 picks a free one. Default 8080 (the CLI) — the embedding API defaults to 0. */
  port?: number;
  /** Worker processes (shards). Default 8. */
  workers?: number;
  /** SGLang-compatible engine URL. When absent, the built-in simulated engine is started. */
  engineUrl?: string;
  /** The engine API: "sglang-chat" (default), "sglang-generate" or "vllm-completions". */
  engineApi?: "sglang-chat" | "sglang-generate" | "vllm-completions";
  /** Hugging Face tokenizer folder. Default: the bundled Qwen3 folder. */
  tokenizerDir?: string;
  /** TITO model family (docs/models.md); default detected from the tokenizer. */
  titoFamily?: TitoFamilyName;
  chatTemplateKwargs?: Record<string, unknown>;
  /** Roles a later turn may append. Default: the family's (docs/models.md). */
  allowedAppendRoles?: string[];
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
}

export type ResolvedOptions = Required<
  Omit<
    SessionServerOptions,
    | "engineUrl"
    | "tokenizerDir"
    | "titoFamily"
    | "allowedAppendRoles"
    | "eventsFile"
    | "authToken"
    | "onEvent"
    | "dataDir"
  >
> &
  Pick<
    SessionServerOptions,
    | "engineUrl"
    | "tokenizerDir"
    | "titoFamily"
    | "allowedAppendRoles"
    | "eventsFile"
    | "authToken"
    | "onEvent"
    | "dataDir"
  >;

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

function int(name: string, value: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new InvalidOptionError(`${name} must be an integer between ${min} and ${max}, got ${value}`);
  }
  return value;
}

export function resolveOptions(options: SessionServerOptions, defaults: { port: number }): ResolvedOptions {
  const resolved: ResolvedOptions = {
    host: options.host ?? "127.0.0.1",
    port: int("port", options.port ?? defaults.port, 0, 65535),
    workers: int("workers", options.workers ?? 8, 1, 256),
    engineUrl: options.engineUrl,
    engineApi: options.engineApi ?? "sglang-chat",
    tokenizerDir: options.tokenizerDir,
    titoFamily: options.titoFamily,
    chatTemplateKwargs: options.chatTemplateKwargs ?? {},
    allowedAppendRoles: options.allowedAppendRoles,
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
    shutdownGraceMs: int("shutdownGraceMs", options.shutdownGraceMs ?? 5_000, 0),
    startTimeoutMs: int("startTimeoutMs", options.startTimeoutMs ?? 120_000, 1),
    simLatencyMs: int("simLatencyMs", options.simLatencyMs ?? 0, 0),
    simTokenMs: int("simTokenMs", options.simTokenMs ?? 0, 0),
    onEvent: options.onEvent,
    durability: options.durability ?? "journal",
    dataDir: options.dataDir,
    fsync: options.fsync ?? "interval",
  };
  if (!ENGINE_APIS.includes(resolved.engineApi)) {
    throw new InvalidOptionError(
      `engineApi must be one of ${ENGINE_APIS.join(", ")}, got ${JSON.stringify(resolved.engineApi)}`,
    );
  }
  if (!["journal", "memory"].includes(resolved.durability)) {
    throw new InvalidOptionError(
      `durability must be "journal" or "memory", got ${JSON.stringify(resolved.durability)}`,
    );
  }
  if (!["every", "interval", "never"].includes(resolved.fsync)) {
    throw new InvalidOptionError(`fsync must be "every", "interval" or "never", got ${JSON.stringify(resolved.fsync)}`);
  }
  if (resolved.dataDir !== undefined && resolved.dataDir.trim() === "")
    throw new InvalidOptionError("dataDir must not be empty");
  if (resolved.titoFamily !== undefined && !TITO_FAMILIES.includes(resolved.titoFamily)) {
    throw new InvalidOptionError(
      `titoFamily must be one of ${TITO_FAMILIES.join(", ")}, got ${JSON.stringify(resolved.titoFamily)}`,
    );
  }
  if (!LOG_LEVELS.includes(resolved.logLevel)) {
    throw new InvalidOptionError(`logLevel must be one of ${LOG_LEVELS.join(", ")}, got ${resolved.logLevel}`);
  }
  if (resolved.engineUrl) {
    try {
      const url = new URL(resolved.engineUrl);
      if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("not http(s)");
    } catch {
      throw new InvalidOptionError(`engineUrl must be an http(s) URL, got ${resolved.engineUrl}`);
    }
  }
  if (resolved.allowedAppendRoles?.length === 0)
    throw new InvalidOptionError("allowedAppendRoles must name at least one role");
  for (const path of resolved.agentProxyAllow)
    if (!path.startsWith("/") || path.includes("?"))
      throw new InvalidOptionError(
        `agentProxyAllow entries are engine paths starting with "/" and no query, got ${JSON.stringify(path)}`,
      );
  return resolved;
}
