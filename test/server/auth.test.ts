// Least privilege at the front door (docs/security.md), through the tree in this process
// (test/helpers/tree.ts), real HTTP and the `openai` and Anthropic clients: the admin token
// may do everything; a session token only chats on its own session and GETs the
// allowlisted engine routes; tokens cannot be forged or truncated. Tokens across a router
// kill -9 and another instance, and logs, are test/server/auth-tree.test.ts (the real CLI).
import type { Server } from "node:http";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { call, WEATHER_TOOL } from "../helpers/server.ts";
import { startRecorder, type Upstream } from "../helpers/recording-proxy.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

const ADMIN = "admin-secret-for-tests-0123456789";
const admin = { authorization: `Bearer ${ADMIN}` };
let engine: SimEngine;
let recorder: Server;
let recorderUrl: string;
let run: InProcessTree;
/** Every request the engine got, as the recording proxy in front of it saw it. */
const upstream: Upstream[] = [];

async function created(base: string): Promise<{ session_id: string; session_token: string }> {
  const res = await call<{ session_id: string; session_token: string }>(base, "POST", "/sessions", undefined, admin);
  assert.is(res.status, 200, res.text);
  return res.json;
}

const agent = (base: string, id: string, token: string) =>
  new OpenAI({ baseURL: `${base}/sessions/${id}/v1`, apiKey: token, maxRetries: 0 });

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: sharedFolder() });
  recorder = await startRecorder(engine.url, upstream);
  const address = recorder.address();
  recorderUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  run = await startTree({ engineUrl: recorderUrl, workers: 2, authToken: ADMIN });
});

test.after(async () => {
  await run?.shutdown();
  await new Promise((r) => recorder?.close(r));
  await engine?.close();
});

test("the admin gets a session token beside the id; the agent's openai client runs a tool loop with it", async () => {
  const { session_id: id, session_token: token } = await created(run.url);
  assert.match(token, /^tst_[A-Za-z0-9_-]{43}$/);
  const client = agent(run.url, id, token);
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    { role: "user", content: "Weather in Paris?" },
  ];
  const first = await client.chat.completions.create({ model: "m", messages, tools: [WEATHER_TOOL as never] });
  const call0 = first.choices[0]!.message.tool_calls![0]!;
  messages.push(first.choices[0]!.message, { role: "tool", tool_call_id: call0.id, content: "sunny" });
  const second = await client.chat.completions.create({ model: "m", messages, tools: [WEATHER_TOOL as never] });
  assert.is(second.choices[0]!.finish_reason, "stop");
  const models = await client.models.list();
  assert.ok(models.data.length > 0, "GET /v1/models through the proxy is allowlisted");
  const records = await call<{ records: unknown[] }>(run.url, "GET", `/sessions/${id}`, undefined, admin);
  assert.is(records.json.records.length, 2);
});

test("an Anthropic agent with its session token (authToken) takes turns on its own session only", async () => {
  const { session_id: id, session_token: token } = await created(run.url);
  const client = new Anthropic({ baseURL: `${run.url}/sessions/${id}`, authToken: token, apiKey: null, maxRetries: 0 });
  const reply = await client.messages.create({
    model: "m",
    max_tokens: 50,
    messages: [{ role: "user", content: "hi" }],
  });
  assert.is(reply.type, "message");
  const other = await created(run.url);
  const res = await call<{ type: string; error: { type: string; message: string; code: string } }>(
    run.url,
    "POST",
    `/sessions/${other.session_id}/v1/messages`,
    { model: "m", max_tokens: 5, messages: [{ role: "user", content: "hi" }] },
    { authorization: `Bearer ${token}` },
  );
  assert.is(res.status, 403);
  // The router's refusal on the Messages route is in Anthropic's shape, our code inside.
  assert.is(res.json.type, "error");
  assert.equal([res.json.error.type, res.json.error.code], ["permission_error", "TITO_ERR_FORBIDDEN"]);
  assert.match(
    res.json.error.message,
    /may only POST \/sessions\/\{its id\}\/v1\/chat\/completions \(or \/v1\/messages\)/,
  );
});

test("a session token may do nothing else: 403 naming what it may do, 401 without a token", async () => {
  const mine = await created(run.url);
  const other = await created(run.url);
  const bearer = { authorization: `Bearer ${mine.session_token}` };
  const chatBody = { model: "m", messages: [{ role: "user", content: "hi" }] };
  const refused: Array<[string, string, unknown?]> = [
    ["POST", `/sessions/${other.session_id}/v1/chat/completions`, chatBody],
    ["GET", `/sessions/${mine.session_id}`],
    ["GET", `/sessions/${other.session_id}`],
    ["POST", `/sessions/${mine.session_id}/samples`, {}],
    ["DELETE", `/sessions/${mine.session_id}`],
    ["POST", "/sessions"],
    ["GET", "/supervision"],
    ["GET", "/metrics"],
    ["POST", `/sessions/${mine.session_id}/flush_cache`, {}],
    ["POST", `/sessions/${mine.session_id}/update_weights_from_disk`, { model_path: "/x" }],
    ["GET", `/sessions/${mine.session_id}/get_server_info`],
    ["GET", `/sessions/${other.session_id}/v1/models`],
  ];
  for (const [method, path, body] of refused) {
    const res = await call<{ error: string }>(run.url, method, path, body, bearer);
    assert.is(res.status, 403, `${method} ${path}: ${res.text}`);
    assert.match(res.json.error, /a session token may only POST \/sessions\/\{its id\}\/v1\/chat\/completions/);
  }
  for (const path of ["/v1/models", "/health", "/get_model_info"]) {
    const res = await call(run.url, "GET", `/sessions/${mine.session_id}${path}`, undefined, bearer);
    assert.is.not(res.status, 403, `GET ${path} is allowlisted`);
    assert.is.not(res.status, 401);
  }
  assert.is((await call(run.url, "POST", "/sessions")).status, 401);
  assert.is((await call(run.url, "GET", "/health")).status, 200, "only the exact /health is open");
  assert.is((await call(run.url, "HEAD", "/health")).status, 200, "HEAD of the exact /health is open too");
  // The check is on the URL sent, not the route matched: these match /health's route but are not open.
  for (const path of ["/health?x=1", "/health/"])
    assert.is((await call(run.url, "GET", path)).status, 401, `GET ${path} needs a token`);
  // Nothing was done on the other session, nor deleted on this one.
  const otherRecords = await call<{ records: unknown[] }>(
    run.url,
    "GET",
    `/sessions/${other.session_id}`,
    undefined,
    admin,
  );
  assert.is(otherRecords.json.records.length, 0);
  assert.is((await call(run.url, "GET", `/sessions/${mine.session_id}`, undefined, admin)).status, 200);
  const metrics = await call(run.url, "GET", "/metrics", undefined, admin);
  assert.match(
    metrics.text,
    /tito_auth_refusals_total\{route="\/sessions\/:id\/v1\/chat\/completions",status="403"\} [1-9]/,
  );
  assert.match(metrics.text, /tito_auth_refusals_total\{route="\/sessions",status="401"\} [1-9]/);
});

test("forged and truncated tokens are refused", async () => {
  const { session_id: id, session_token: token } = await created(run.url);
  const chatBody = { model: "m", messages: [{ role: "user", content: "hi" }] };
  const forged = `tst_${"A".repeat(43)}`;
  for (const bad of [forged, token.slice(0, -1), `${token}x`, token.slice(4), token.toLowerCase(), ""]) {
    const res = await call(run.url, "POST", `/sessions/${id}/v1/chat/completions`, chatBody, {
      authorization: `Bearer ${bad}`,
    });
    assert.ok(res.status === 401 || res.status === 403, `${JSON.stringify(bad)}: ${res.status}`);
  }
});

test.run();
