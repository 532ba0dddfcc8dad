// Every route of docs/http.md through the tree in this process (test/helpers/tree.ts: the
// router app, 2 workers over Unix sockets, the simulated engine as the stand-in for the GPU
// engine). /supervision and the workers' memory metrics need real processes: they are in
// test/server/supervision.test.ts.
import { test } from "uvu";
import * as assert from "uvu/assert";
import OpenAI from "openai";
import { shardOf } from "../../server/protocol/shard-protocol.ts";
import type {
  ErrorBody,
  HealthBody,
  MetaInfo,
  ModelsBody,
  SessionBody,
  SessionCreatedBody,
  WireMessage,
} from "../helpers/bodies.ts";
import {
  call,
  chat,
  newSession,
  startGatedEngine,
  toolLoop,
  WEATHER_TOOL,
  type GatedEngine,
} from "../helpers/server.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

let engine: GatedEngine;
let server: InProcessTree;
let base: string;
const WORKERS = 2;
const BODY_LIMIT = 1024 * 1024;

test.before(async () => {
  engine = await startGatedEngine({ tokenizerFolder: sharedFolder() });
  server = await startTree({ engineUrl: engine.url, workers: WORKERS, bodyLimit: BODY_LIMIT });
  base = server.url;
});

test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

test("GET /health: ok with a fixed 32-hex instance id", async () => {
  const a = await call<HealthBody>(base, "GET", "/health");
  const b = await call<HealthBody>(base, "GET", "/health");
  assert.is(a.status, 200);
  assert.is(a.json.status, "ok");
  assert.match(a.json.session_server_instance_id, /^[0-9a-f]{32}$/);
  assert.is(b.json.session_server_instance_id, a.json.session_server_instance_id);
  assert.is(a.json.session_server_instance_id, server.tree().instance_id);
});

test("POST /sessions mints a 32-hex id routed to its shard; GET, DELETE, then 404", async () => {
  const created = await call<SessionCreatedBody>(base, "POST", "/sessions");
  assert.is(created.status, 200);
  const id = created.json.session_id;
  assert.match(id, /^[0-9a-f]{32}$/);
  const shard = String(shardOf(id, WORKERS));
  assert.is(created.headers.get("x-tito-shard"), shard);
  const got = await call<SessionBody>(base, "GET", `/sessions/${id}`);
  assert.is(got.status, 200);
  assert.is(got.headers.get("x-tito-shard"), shard);
  assert.equal(got.json.session_id, id);
  assert.equal(got.json.records, []);
  assert.not.ok("tito_session_mismatch" in got.json.metadata, "no drift report before the first turn");
  const deleted = await call(base, "DELETE", `/sessions/${id}`);
  assert.is(deleted.status, 204);
  assert.is(deleted.text, "");
  assert.is(deleted.headers.get("x-tito-shard"), shard);
  for (const method of ["GET", "DELETE"]) {
    const gone = await call(base, method, `/sessions/${id}`);
    assert.is(gone.status, 404);
    assert.equal(gone.json, { error: `session not found: session_id=${id}`, code: "TITO_ERR_SESSION_NOT_FOUND" });
  }
});

test("a tool-calling multi-turn conversation is recorded with its exact tokens", async () => {
  const id = await newSession(base);
  const { first, second, messages } = await toolLoop(base, id);
  assert.is(first.res.status, 200);
  assert.is(first.message!.tool_calls![0].function.name, "get_weather");
  assert.is(first.message!.content, "");
  assert.is(second.res.status, 200);
  assert.ok(second.message!.content.length > 0);
  const got = await call<SessionBody>(base, "GET", `/sessions/${id}`);
  assert.is(got.json.records.length, 2);
  const [r1, r2] = got.json.records;
  assert.is(r1.status_code, 200);
  assert.is(r1.path, "/v1/chat/completions");
  const acc1 = [
    ...r1.request.input_ids,
    ...r1.response.choices[0].meta_info.output_token_logprobs.map((p: number[]) => p[1]),
  ];
  assert.equal(r2.request.input_ids.slice(0, acc1.length), acc1, "turn 2's prompt starts with turn 1's tokens");
  const meta = got.json.metadata;
  const acc2 = [
    ...r2.request.input_ids,
    ...r2.response.choices[0].meta_info.output_token_logprobs.map((p: number[]) => p[1]),
  ];
  assert.equal(meta.accumulated_token_ids, acc2);
  assert.is(meta.max_trim_tokens, 0);
  assert.is(meta.tito_family, "qwen3");
  const bad = meta.tito_session_mismatch!.filter((m) => m.type !== "assistant_text");
  assert.equal(bad, [], JSON.stringify(meta.tito_session_mismatch));
  assert.is(messages.length, 5);
});

test("a retried first turn (its reply lost) is a rollback to the empty session: one turn, the second try's", async () => {
  const id = await newSession(base);
  const messages = [{ role: "user", content: "What is the weather in Lisbon?" }];
  const first = await chat(base, id, messages, { tools: [WEATHER_TOOL] });
  assert.is(first.res.status, 200);
  const again = await chat(base, id, messages, { tools: [WEATHER_TOOL] });
  assert.is(again.res.status, 200, again.res.text);
  assert.is.not(again.res.json.id, first.res.json.id, "a new generation, not a replay of the first reply");
  const got = await call<SessionBody>(base, "GET", `/sessions/${id}`);
  assert.is(got.json.records.length, 1, "the session holds one turn");
  assert.is(got.json.records[0].response.id, again.res.json.id, "the record is the second try's");
  const third = await chat(
    base,
    id,
    [
      ...messages,
      again.message!,
      { role: "tool", tool_call_id: again.message!.tool_calls![0].id, content: '{"temp_c": 19}' },
    ],
    { tools: [WEATHER_TOOL] },
  );
  assert.is(third.res.status, 200, "the session goes on from the retried turn");
  assert.is((await call<SessionBody>(base, "GET", `/sessions/${id}`)).json.records.length, 2);
});

test("chat errors: invalid JSON 400, disallowed role 400, unknown session 404", async () => {
  const id = await newSession(base);
  const badJson = await call<ErrorBody>(base, "POST", `/sessions/${id}/v1/chat/completions`, "{not json");
  assert.is(badJson.status, 400);
  assert.match(badJson.json.error, /^invalid JSON body: /);
  const { message } = await chat(base, id, [{ role: "user", content: "hi" }]);
  // qwen3 may append tool, user, system and assistant messages; any other role is refused.
  const appendUser = await chat<ErrorBody>(base, id, [
    { role: "user", content: "hi" },
    message,
    { role: "developer", content: "again" },
  ]);
  assert.is(appendUser.res.status, 400);
  assert.match(appendUser.res.json.error, /index 2/);
  assert.match(appendUser.res.json.error, /'tool', 'user', 'system', 'assistant'|tool.*user.*system.*assistant/);
  const missing = await chat(base, "f".repeat(32), [{ role: "user", content: "hi" }]);
  assert.is(missing.res.status, 404);
  assert.equal(missing.res.json, {
    error: `session not found: session_id=${"f".repeat(32)}`,
    code: "TITO_ERR_SESSION_NOT_FOUND",
  });
  const records = await call<SessionBody>(base, "GET", `/sessions/${id}`);
  assert.is(records.json.records.length, 1, "failed turns record nothing");
});

test("proxy passes through to the engine, without needing a session; escaping the root is 400", async () => {
  const id = "0123456789abcdef0123456789abcdef";
  const models = await call<ModelsBody>(base, "GET", `/sessions/${id}/v1/models`);
  assert.is(models.status, 200);
  assert.is(models.json.object, "list");
  assert.is(models.headers.get("x-tito-shard"), String(shardOf(id, WORKERS)));
  const missing = await call(base, "GET", `/sessions/${id}/no/such/path`);
  assert.is(missing.status, 404, "the engine's status passes through");
  const escape = await call<ErrorBody>(base, "GET", `/sessions/${id}/v1/..%2F..%2Fhealth`);
  assert.is(escape.status, 400);
  assert.match(escape.json.error, /escape/);
});

test("bodies above the limit are 413; unknown routes are 404 JSON", async () => {
  const id = await newSession(base);
  const big = await call<ErrorBody>(base, "POST", `/sessions/${id}/v1/chat/completions`, "x".repeat(BODY_LIMIT + 1));
  assert.is(big.status, 413);
  assert.match(big.json.error, /too large/);
  const nowhere = await call<ErrorBody>(base, "GET", "/nowhere");
  assert.is(nowhere.status, 404);
  assert.match(nowhere.json.error, /route not found/);
});

test("16 sessions x 3 turns concurrently, spread over shards, every op on the owner", async () => {
  const shardsSeen = new Set<string>();
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      const id = await newSession(base);
      const owner = String(shardOf(id, WORKERS));
      const messages: WireMessage[] = [{ role: "user", content: `question for ${id}` }];
      for (let turn = 0; turn < 3; turn++) {
        const { res, message } = await chat(base, id, messages, { tools: [WEATHER_TOOL] });
        assert.is(res.status, 200, res.text);
        assert.is(res.headers.get("x-tito-shard"), owner);
        messages.push(message!);
        messages.push({ role: "tool", tool_call_id: message!.tool_calls?.[0]?.id ?? "x", content: `result ${turn}` });
      }
      const got = await call<SessionBody>(base, "GET", `/sessions/${id}`);
      assert.is(got.json.records.length, 3);
      assert.is(got.headers.get("x-tito-shard"), owner);
      shardsSeen.add(owner);
      assert.is((await call(base, "DELETE", `/sessions/${id}`)).status, 204);
    }),
  );
  assert.is(shardsSeen.size, WORKERS);
});

test("the official openai client completes a chat through the session route", async () => {
  const id = await newSession(base);
  const client = new OpenAI({ baseURL: `${base}/sessions/${id}/v1`, apiKey: "unused" });
  const completion = await client.chat.completions.create({
    model: "tito-sim",
    messages: [{ role: "user", content: "Say something." }],
  });
  assert.ok(completion.choices[0].message.content);
  const got = await call<SessionBody>(base, "GET", `/sessions/${id}`);
  assert.is(got.json.records.length, 1);
  // SGLang's meta_info is not in the openai client's types.
  const choice = completion.choices[0] as (typeof completion.choices)[number] & { meta_info: MetaInfo };
  assert.not.ok("routed_experts" in choice.meta_info);
});

/** The value of one sample line of Prometheus text, 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number {
  for (const line of text.split("\n")) {
    if (!line.startsWith(name + "{") && !line.startsWith(name + " ")) continue;
    const inner = /\{(.*)\}/.exec(line)?.[1] ?? "";
    if (Object.entries(labels).every(([k, v]) => inner.includes(`${k}="${v}"`))) return Number(line.split(" ").at(-1));
  }
  return 0;
}

test("GET /metrics: Prometheus text whose counters move with traffic", async () => {
  const before = await call(base, "GET", "/metrics");
  assert.is(before.status, 200);
  assert.match(before.headers.get("content-type")!, /text\/plain/);
  const id = await newSession(base);
  const shard = String(shardOf(id, WORKERS));
  const turn = await chat(base, id, [{ role: "user", content: "count me" }]);
  assert.is(turn.res.status, 200);
  const after = (await call(base, "GET", "/metrics")).text;
  const chatRoute = { route: "/sessions/:id/v1/chat/completions", method: "POST", status: "200" };
  assert.is(
    sample(after, "tito_http_requests_total", chatRoute),
    sample(before.text, "tito_http_requests_total", chatRoute) + 1,
  );
  assert.ok(sample(after, "tito_chat_latency_seconds_count", { status: "200" }) >= 1);
  const engineCalls = (t: string) =>
    sample(t, "tito_engine_request_duration_seconds_count", { shard, path: "/v1/chat/completions", status: "200" });
  assert.is(engineCalls(after), engineCalls(before.text) + 1, "the owning worker's engine histogram moved");
  assert.ok(sample(after, "tito_sessions", { shard }) >= 1);
  assert.ok(sample(after, "tito_worker_reply_bytes_total", { shard, op: "chat" }) > 0);
  assert.ok(
    sample(after, "tito_relayed_reply_bytes_total", { shard }) >
      sample(before.text, "tito_relayed_reply_bytes_total", { shard }),
  );
  assert.is(sample(after, "tito_tree_state", { state: "running" }), 1);
  assert.is(sample(after, "tito_child_restarts", { actor: "router" }), 0);
  assert.match(after, /tito_inflight_requests/);
});

test.run();
