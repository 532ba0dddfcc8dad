// A session core wired to an engine the way a worker wires it (server/worker/worker-main.ts):
// the sglang-chat adapter over the one engine client, pooled replies when the record store
// copies what it keeps. Tests that exercise the core pass engine options instead of an Engine.
import { createEngine, type EngineApi } from "../../engine/index.ts";
import {
  createSessionCore,
  type CoreRequest,
  type CoreResponse,
  type SessionCore,
  type SessionCoreOptions,
} from "../../sessions/index.ts";
import { WEATHER_TOOL } from "../sessions/fixtures.ts";

export interface TestCoreOptions extends Omit<SessionCoreOptions, "engine"> {
  engineUrl: string;
  engineApi?: EngineApi;
  engineTimeoutMs?: number;
  engineConnectTimeoutMs?: number;
  routingReplay?: boolean;
  indexerReplay?: boolean;
  authToken?: string;
  /** `--engine-session-headers` (engine/adapter.ts); default none. */
  sessionHeaders?: readonly string[];
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
    sessionHeaders: options.sessionHeaders,
  });
  return createSessionCore({ ...options, engine });
}

/** A core response's body as text, whatever its shape: one buffer, a list, or a journal stream. */
export async function responseText(res: CoreResponse): Promise<string> {
  if (Buffer.isBuffer(res.body)) return res.body.toString();
  if (Array.isArray(res.body)) return Buffer.concat(res.body).toString();
  const parts: Buffer[] = [];
  for await (const chunk of res.body) parts.push(chunk);
  return Buffer.concat(parts).toString();
}

export async function responseJson(res: CoreResponse) {
  return JSON.parse(await responseText(res));
}

/** A chat completions request as the worker hands it to the core: `messages`, with the weather tool. */
export const chatRequest = (messages: unknown[]): CoreRequest => ({
  method: "POST",
  path: "/v1/chat/completions",
  query: "",
  headers: {},
  body: Buffer.from(JSON.stringify({ model: "m", messages, tools: [WEATHER_TOOL] })),
});
