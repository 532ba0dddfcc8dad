// The official SDKs drive an overload (server/router/admission.ts): a server with
// --max-inflight-turns 2 and --max-queued-turns 4 and eight agents at once, each its own
// session and two turns, each agent a client with the SDK's default retries. The turns past
// the bound get 429 with Retry-After (TITO_ERR_OVERLOADED; on the Anthropic route
// rate_limit_error), the SDK waits and retries them (x-stainless-retry-count), and every
// agent's turns complete: one engine generation and one record per turn, none lost or
// doubled. The SDKs' own fetch is wrapped only to watch what goes over the wire.
import { test } from "uvu";
import * as assert from "uvu/assert";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { call, newSession } from "../helpers/server.ts";
import type { SessionBody } from "../helpers/bodies.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

const AGENTS = 8;
let engine: SimEngine;
let server: InProcessTree;

test.before(async () => {
  engine = await startSimEngine({ latencyMs: 50, tokenizerFolder: sharedFolder() });
  server = await startTree({
    engineUrl: engine.url,
    engineApi: "sglang-chat",
    workers: 1,
    tokenizerFolder: sharedFolder(),
    maxInflightTurns: 2,
    maxQueuedTurns: 4,
  });
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

interface Exchange {
  retryCount: number;
  status: number;
  retryAfter: string | null;
  errorType?: string;
}

/** The global fetch, noting each exchange (its retry count, status, Retry-After and error type). */
function watchedFetch(exchanges: Exchange[]) {
  return async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const res = await fetch(input, init);
    const retryCount = Number(new Headers(init?.headers).get("x-stainless-retry-count") ?? 0);
    const exchange: Exchange = { retryCount, status: res.status, retryAfter: res.headers.get("retry-after") };
    if (res.status === 429) {
      const body = (await res.clone().json()) as { code?: string; error?: { type?: string } };
      exchange.errorType = body.code ?? body.error?.type;
    }
    exchanges.push(exchange);
    return res;
  };
}

async function recordCounts(ids: string[]): Promise<number[]> {
  return Promise.all(
    ids.map(async (id) => (await call<SessionBody>(server.url, "GET", `/sessions/${id}`)).json.records.length),
  );
}

function assertRetried(exchanges: Exchange[], errorType: string) {
  const refused = exchanges.filter((e) => e.status === 429);
  assert.ok(refused.length > 0, "over the bound: some attempts were refused");
  for (const e of refused) {
    assert.is(e.retryAfter, "1");
    assert.is(e.errorType, errorType);
  }
  assert.ok(
    exchanges.some((e) => e.retryCount > 0 && e.status === 200),
    "the SDK retried a refused turn and it was served",
  );
  assert.is(exchanges.filter((e) => e.status === 200).length, AGENTS * 2, "one 200 per turn");
}

test("openai SDK: 429s are retried after Retry-After, every agent's two turns complete once", async () => {
  const ids = await Promise.all(Array.from({ length: AGENTS }, () => newSession(server.url)));
  const exchanges: Exchange[] = [];
  const before = engine.requests;
  await Promise.all(
    ids.map(async (id, i) => {
      const client = new OpenAI({
        baseURL: `${server.url}/sessions/${id}/v1`,
        apiKey: "unused",
        fetch: watchedFetch(exchanges),
      });
      const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: `Agent ${i}: the weather?` }];
      const first = await client.chat.completions.create({ model: "m", messages });
      messages.push(first.choices[0]!.message, { role: "user", content: "And tomorrow?" });
      const second = await client.chat.completions.create({ model: "m", messages });
      assert.ok(second.choices[0]!.message.content !== undefined);
    }),
  );
  assertRetried(exchanges, "TITO_ERR_OVERLOADED");
  assert.is(engine.requests - before, AGENTS * 2, "one generation per turn");
  assert.equal(await recordCounts(ids), Array<number>(AGENTS).fill(2));
});

test("Anthropic SDK: rate_limit_error 429s are retried, every agent's two turns complete once", async () => {
  const ids = await Promise.all(Array.from({ length: AGENTS }, () => newSession(server.url)));
  const exchanges: Exchange[] = [];
  const before = engine.requests;
  await Promise.all(
    ids.map(async (id, i) => {
      const client = new Anthropic({
        baseURL: `${server.url}/sessions/${id}`,
        apiKey: "unused",
        fetch: watchedFetch(exchanges),
      });
      const messages: Anthropic.MessageParam[] = [{ role: "user", content: `Agent ${i}: the weather?` }];
      const first = await client.messages.create({ model: "m", max_tokens: 64, messages });
      messages.push({ role: "assistant", content: first.content }, { role: "user", content: "And tomorrow?" });
      const second = await client.messages.create({ model: "m", max_tokens: 64, messages });
      assert.is(second.type, "message");
    }),
  );
  assertRetried(exchanges, "rate_limit_error");
  assert.is(engine.requests - before, AGENTS * 2, "one generation per turn");
  assert.equal(await recordCounts(ids), Array<number>(AGENTS).fill(2));
});

test.run();
