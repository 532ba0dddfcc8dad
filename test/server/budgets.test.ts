// Session budgets (sessions/budget.ts) through the router and a worker on each engine API
// (the in-process tree, test/helpers/tree.ts: one tokenizer load for all six): a session
// created with max_turns or max_total_tokens, or under the server's --max-session-turns,
// gets a 400 naming the numbers for a turn over it, with nothing sent to the engine and the
// session as it was; the room left caps the turn's max_tokens; a prompt over the context
// length the engine states is the same 400, nothing sent; an engine that states none
// refuses it itself (the simulated engine answers as each upstream does, status, body and
// for SGLang's streamed /generate the error event) and that is the same 400; a bad budget
// body creates nothing. --max-session-turns goes through a real tree (host to worker).
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer } from "../../index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { call, chat } from "../helpers/server.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";
import type { ChatCompletion, SessionBody, SessionCreatedBody, WireMessage } from "../helpers/bodies.ts";

type Api = "sglang-chat" | "sglang-generate" | "vllm-completions";
const APIS = ["sglang-chat", "sglang-generate", "vllm-completions"] as const;
let engine: SimEngine;
const servers = new Map<Api, InProcessTree>();
let withDefaults: SessionServer;
/** States no context length in GET /v1/models, and refuses a prompt over 64 tokens as its upstream does. */
let silent: SimEngine;
const silentServers = new Map<Api, InProcessTree>();

test.before(async () => {
  const tokenizerFolder = sharedFolder();
  engine = await startSimEngine({ tokenizerFolder });
  silent = await startSimEngine({ tokenizerFolder, maxModelLen: 64, modelsWithoutMaxModelLen: true });
  for (const api of APIS) {
    servers.set(api, await startTree({ engineUrl: engine.url, engineApi: api, workers: 1, tokenizerFolder }));
    silentServers.set(api, await startTree({ engineUrl: silent.url, engineApi: api, workers: 1, tokenizerFolder }));
  }
  withDefaults = await startSessionServer({
    engineUrl: engine.url,
    engineApi: "sglang-generate",
    workers: 1,
    logLevel: "warn",
    maxSessionTurns: 1,
  });
});
test.after(async () => {
  for (const server of [...servers.values(), ...silentServers.values()]) await server.shutdown();
  await withDefaults?.shutdown();
  await engine?.close();
  await silent?.close();
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

  test(`${api}: a prompt over the engine's context length (its GET /v1/models) is a 400 naming both; nothing sent`, async () => {
    const base = servers.get(api)!.url;
    const id = (await create(base)).json.session_id;
    const before = engine.requests;
    const long = [{ role: "user", content: "x ".repeat(41_000) }];
    const res = (await chat<{ error: string; code: string }>(base, id, long, { max_tokens: 8 })).res;
    assert.is(res.status, 400);
    assert.is(res.json.code, "TITO_ERR_BUDGET");
    assert.match(res.json.error, /the prompt has \d{5} tokens and the engine's context length is 40960/);
    assert.is(engine.requests, before, "nothing sent to the engine");
    assert.is((await records(base, id)).records.length, 0);
  });

  test(`${api}: the engine's own "prompt too long" reply (its real status and body) is TITO_ERR_BUDGET's 400`, async () => {
    // This engine's /v1/models states no length: the server sends, the engine refuses.
    const base = silentServers.get(api)!.url;
    const id = (await create(base)).json.session_id;
    const long = [{ role: "user", content: "Tell me about the weather in Paris. ".repeat(12) }];
    const streams = api === "sglang-generate" ? [false, true] : [false];
    for (const stream of streams) {
      const before = silent.requests;
      const res = (await chat<{ error: string; code: string }>(base, id, long, { max_tokens: 8, stream })).res;
      assert.is(res.status, 400, `stream: ${stream}`);
      assert.is(res.json.code, "TITO_ERR_BUDGET");
      assert.match(res.json.error, "the engine refused the prompt as too long");
      assert.match(res.json.error, "64");
      assert.is(silent.requests, before + 1, "the engine was asked once");
    }
    assert.is((await records(base, id)).records.length, 0);
    // A prompt that fits is served by the same engine.
    const fits = await chat(base, id, ASK, { max_tokens: 8 });
    assert.is(fits.res.status, 200);
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
