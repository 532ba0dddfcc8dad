// A session core wired to an engine the way a worker wires it (server/worker/worker-main.ts):
// the sglang-chat adapter over the one engine client, pooled replies when the record store
// copies what it keeps. Tests that exercise the core pass engine options instead of an Engine.
import { createEngine, type EngineApi } from "../../engine/index.ts";
import { createSessionCore, type SessionCore, type SessionCoreOptions } from "../../sessions/index.ts";

export interface TestCoreOptions extends Omit<SessionCoreOptions, "engine"> {
  engineUrl: string;
  engineApi?: EngineApi;
  engineTimeoutMs?: number;
  engineConnectTimeoutMs?: number;
  routingReplay?: boolean;
  indexerReplay?: boolean;
  authToken?: string;
}

export function coreFor(options: TestCoreOptions): SessionCore {
  const { engineUrl, engineApi, engineTimeoutMs, engineConnectTimeoutMs, routingReplay, indexerReplay, authToken } =
    options;
  const engine = createEngine({
    api: engineApi ?? "sglang-chat",
    engineUrl,
    timeoutMs: engineTimeoutMs ?? 600_000,
    connectTimeoutMs: engineConnectTimeoutMs ?? 10_000,
    routingReplay: routingReplay ?? false,
    indexerReplay: indexerReplay ?? false,
    dropAuthorization: authToken !== undefined,
    pooledReplies: options.recordStore !== undefined && !options.recordStore.retainsReplyBuffers,
  });
  return createSessionCore({ ...options, engine });
}
