// The engine layer's public surface: `createEngine()` builds the adapter for one engine
// API over the one HTTP client, which the worker hands to the session core as its Engine.
import type { ConnectionOptions } from "node:tls";
import type { Engine } from "../sessions/engine-port.ts";
import { ReplyBuffers } from "./reply-buffers.ts";
import { sglangChatEngine } from "./sglang-chat.ts";
import { sglangGenerateEngine } from "./sglang-generate.ts";
import { vllmCompletionsEngine } from "./vllm-completions.ts";
import { createUpstream, type UpstreamObservation } from "./upstream.ts";

export type { UpstreamObservation } from "./upstream.ts";

/** The engine APIs `--engine-api` names. */
export const ENGINE_APIS = ["sglang-chat", "sglang-generate", "vllm-completions"] as const;
export type EngineApi = (typeof ENGINE_APIS)[number];

export interface EngineOptions {
  api: EngineApi;
  engineUrl: string;
  /** No complete reply within this is a 504. */
  timeoutMs: number;
  /** No connection within this is a 502 "engine unreachable". */
  connectTimeoutMs: number;
  routingReplay: boolean;
  indexerReplay: boolean;
  /** The server owns authentication: the client's `authorization` never goes upstream. */
  dropAuthorization: boolean;
  /** Receive large replies into pooled buffers (only when the record store copies what it keeps). */
  pooledReplies: boolean;
  /** Called after every engine call (metrics); must not throw. */
  observe?: (observation: UpstreamObservation) => void;
  /** TLS options for an https engine beyond the system's CAs. */
  tls?: ConnectionOptions;
  /** Counts malformed tool-call blocks in token-level completions (a metric); must not throw. */
  onMalformedToolCalls?: (count: number) => void;
  /** Counts generations the engine aborted (`tito_engine_aborts_total`); must not throw. */
  onEngineAbort?: () => void;
  /** `--engine-model`: the served model name sent upstream (vllm-completions), instead of /v1/models' first. */
  engineModel?: string;
  /** `--engine-session-headers`: the headers every request of a session carries its routing key in. */
  sessionHeaders?: readonly string[];
}

export function createEngine(options: EngineOptions): Engine {
  const upstream = createUpstream(options.engineUrl, {
    timeoutMs: options.timeoutMs,
    connectTimeoutMs: options.connectTimeoutMs,
    observe: options.observe,
    tls: options.tls,
  });
  const adapter = {
    upstream,
    routingReplay: options.routingReplay,
    indexerReplay: options.indexerReplay,
    dropAuthorization: options.dropAuthorization,
    replyBuffers: options.pooledReplies ? new ReplyBuffers() : undefined,
    onMalformedToolCalls: options.onMalformedToolCalls,
    onEngineAbort: options.onEngineAbort,
    engineModel: options.engineModel,
    sessionHeaders: options.sessionHeaders,
  };
  switch (options.api) {
    case "sglang-chat":
      return sglangChatEngine(adapter);
    case "sglang-generate":
      return sglangGenerateEngine(adapter);
    case "vllm-completions":
      return vllmCompletionsEngine(adapter);
  }
}
