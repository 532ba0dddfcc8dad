// Session budgets (sessions/budget.ts) through the real tree on each engine API: a session
// created with max_turns or max_total_tokens, or under the server's --max-session-turns,
// gets a 400 naming the numbers for a turn over it, with nothing sent to the engine and the
// session as it was; the room left caps the turn's max_tokens; the engine's own "prompt too
// long" 400 (SGLang's and vLLM's messages) is the same 400; a bad budget body creates nothing.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer } from "../../index.ts";
import { startSimEngine, type SimEngine, type SimRoute } from "../../server/sim-engine/sim-engine.ts";
import { call, chat } from "../helpers/server.ts";
import type { ChatCompletion, SessionBody, SessionCreatedBody, WireMessage } from "../helpers/bodies.ts";

type Api = "sglang-chat" | "sglang-generate" | "vllm-completions";
const APIS = ["sglang-chat", "sglang-generate", "vllm-completions"] as const;
let engine: SimEngine;
const servers = new Map<Api, SessionServer>();
let withDefaults: SessionServer;
/** While set, the engine refuses every generation as its upstream does a prompt over its context. */
let overflowing = false;

// The upstream texts (sessions/budget.ts cites where each comes from).
const OVERFLOW_TEXT: Record<SimRoute, string> = {
  "/v1/chat/completions": "The input (40960 tokens) is longer than the model's context length (32768 tokens).",
  "/generate": "The input (40960 tokens) is longer than the model's context length (32768 tokens).",
  "/v1/completions":
    "The decoder prompt (length 40960) is longer than the maximum model length of 32768. Make sure that `max_model_len` is no smaller than the number of text tokens.",
};

test.before(async () => {
  engine = await startSimEngine({
    beforeReply: (_body, route) => {
      if (overflowing) throw Object.assign(new Error(OVERFLOW_TEXT[route]), { statusCode: 400 });
    },
  });
  for (const api of APIS)
    servers.set(api, await startSessionServer({ engineUrl: engine.url, engineApi: api, workers: 1, logLevel: "warn" }));
  withDefaults = await startSessionServer({
    engineUrl: engine.url,
    engineApi: "sglang-generate",
    workers: 1,
    logLevel: "warn",
    maxSessionTurns: 1,
  });
});
test.after(async () => {
  for (const server of servers.values()) await server.shutdown();
  await withDefaults?.shutdown();
  await engine?.close();
});

const ASK: WireMessage[] = [{ role: "user", content: "What is the weather in Paris?" }];

async function create(base: string, budget?: unknown) {
  return call<SessionCreatedBody & { error?: string }>(base, "POST", "/sessions", budget);
}

async function records(base: string, id: string) {
  const res = await call<SessionBody>(base, "GET", `/sessions/${id}`);
  assert.is(res.status, 200);
  return res.json;
}

for (const api of APIS) {
  test(`${api}: max_turns: the turn after the last is a 400 naming the numbers; nothing sent, session unchanged`, async () => {
    const base = servers.get(api)!.url;
    const id = (await create(base, { max_turns: 1 })).json.session_id;
    const first = await chat(base, id, ASK);
    assert.is(first.res.status, 200);
    const before = engine.requests;
    const ids = (await records(base, id)).metadata.accumulated_token_ids;
    const second = await chat<{ error: string }>(base, id, [
      ...ASK,
      first.message!,
      { role: "user", content: "More?" },
    ]);
    assert.is(second.res.status, 400);
    assert.match(second.res.json.error, "max_turns is 1");
    assert.is(engine.requests, before, "nothing sent to the engine");
    const after = await records(base, id);
    assert.is(after.records.length, 1);
    assert.equal(after.metadata.accumulated_token_ids, ids);
    // Even a rollback to the start is refused only if it would exceed: a new first turn fits.
    const again = await chat(base, id, ASK);
    assert.is(again.res.status, 200);
  });

  test(`${api}: max_total_tokens: a prompt with no room is a 400; the room left caps max_tokens`, async () => {
    const base = servers.get(api)!.url;
    const probe = await chat(base, (await create(base)).json.session_id, ASK);
    assert.is(probe.res.status, 200);
    const promptTokens = probe.res.json.usage.prompt_tokens;
    const before = engine.requests;
    const tight = (await create(base, { max_total_tokens: promptTokens })).json.session_id;
    const refused = await chat<{ error: string }>(base, tight, ASK);
    assert.is(refused.res.status, 400);
    assert.match(refused.res.json.error, `the prompt has ${promptTokens} tokens`);
    assert.match(refused.res.json.error, `max_total_tokens is ${promptTokens}`);
    assert.is(engine.requests, before);
    assert.is((await records(base, tight)).records.length, 0);
    const roomy = (await create(base, { max_total_tokens: promptTokens + 3 })).json.session_id;
    const capped = await chat<ChatCompletion>(base, roomy, ASK, { max_tokens: 100 });
    assert.is(capped.res.status, 200);
    assert.ok(
      capped.res.json.usage.completion_tokens <= 3,
      `completion ${capped.res.json.usage.completion_tokens} > 3`,
    );
    assert.ok(probe.res.json.usage.completion_tokens > 3, "the uncapped turn is longer: the cap did something");
  });

  test(`${api}: the engine's own "prompt too long" 400 is TITO_ERR_BUDGET's 400, nothing committed`, async () => {
    const base = servers.get(api)!.url;
    const id = (await create(base)).json.session_id;
    overflowing = true;
    let res;
    try {
      res = (await chat<{ error: string }>(base, id, ASK)).res;
    } finally {
      overflowing = false;
    }
    assert.is(res.status, 400);
    assert.match(res.json.error, "the engine refused the prompt as too long");
    assert.match(res.json.error, "32768");
    assert.is((await records(base, id)).records.length, 0);
  });
}

test("the server's --max-session-turns applies to a session created without a budget; a body overrides it", async () => {
  const base = withDefaults.url;
  const id = (await create(base)).json.session_id;
  const first = await chat(base, id, ASK);
  assert.is(first.res.status, 200);
  const second = await chat<{ error: string }>(base, id, [...ASK, first.message!, { role: "user", content: "More?" }]);
  assert.is(second.res.status, 400);
  assert.match(second.res.json.error, "max_turns is 1");
  const two = (await create(base, { max_turns: 2 })).json.session_id;
  const a = await chat(base, two, ASK);
  const b = await chat(base, two, [...ASK, a.message!, { role: "user", content: "More?" }]);
  assert.is(b.res.status, 200);
});

test("a budget body that cannot be used is a 400 and creates nothing; the Anthropic route answers in its shape", async () => {
  const base = servers.get("sglang-chat")!.url;
  for (const bad of [{ max_turns: 0 }, { max_total_tokens: "10" }, { budget: 1 }, [1]]) {
    const res = await create(base, bad);
    assert.is(res.status, 400, JSON.stringify(bad));
    assert.is(res.json.session_id, undefined);
  }
  const put = await call(base, "PUT", "/sessions/budget-bad", { max_turns: -1 });
  assert.is(put.status, 400);
  assert.is((await call(base, "GET", "/sessions/budget-bad")).status, 404);
  const id = (await create(base, { max_total_tokens: 3 })).json.session_id;
  const res = await call<{ type: string; error: { type: string; message: string } }>(
    base,
    "POST",
    `/sessions/${id}/v1/messages`,
    { model: "m", max_tokens: 100, messages: [{ role: "user", content: "Hi" }] },
  );
  assert.is(res.status, 400);
  assert.is(res.json.type, "error");
  assert.match(res.json.error.message, "max_total_tokens is 3");
});

test.run();
