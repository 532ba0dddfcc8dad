// The session core against the simulated engine: real tokenizer, real sockets.
import { coreFor } from "../helpers/core.ts";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { createServer } from "node:net";
import { type CoreResponse, type SessionCore } from "../../sessions/index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import type { WireMessage } from "../helpers/bodies.ts";
import { qwen3, WEATHER_TOOL } from "./fixtures.ts";

const folder = qwen3();
const NL = folder.encode("\n")[0]!;
let engine: SimEngine;
let core: SessionCore;
let replayCore: SessionCore;
// A gate the engine awaits before answering: tests hold a chat "at the engine" with it.
let gate: ((body: unknown) => Promise<void>) | undefined;

const bodyText = (r: CoreResponse) => (Array.isArray(r.body) ? Buffer.concat(r.body) : r.body).toString("utf8");
const bodyJson = (r: CoreResponse) => JSON.parse(bodyText(r));
const chatReq = (body: unknown, headers: Record<string, string> = {}) => ({
  method: "POST",
  path: "/v1/chat/completions",
  query: "",
  headers: { "content-type": "application/json", ...headers },
  body: Buffer.from(typeof body === "string" ? body : JSON.stringify(body)),
});
async function newSession(c = core): Promise<string> {
  const r = await c.create();
  assert.is(r.status, 200);
  return bodyJson(r).session_id;
}

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: folder, routedExpertsBytes: 3000, beforeReply: (b) => gate?.(b) });
  core = coreFor({ engineUrl: engine.url, tokenizerFolder: folder, allowedAppendRoles: ["tool", "user"] });
  replayCore = coreFor({ engineUrl: engine.url, tokenizerFolder: folder, routingReplay: true });
});

test.after(async () => {
  await core.close();
  await replayCore.close();
  await engine.close();
});

test("health, create, get, delete and not-found", async () => {
  assert.equal(bodyJson(core.health()), { status: "ok" });
  const id = await newSession();
  assert.match(id, /^[0-9a-f]{32}$/);
  const got = await core.get(id);
  assert.is(got.status, 200);
  assert.equal(bodyJson(got), {
    session_id: id,
    records: [],
    metadata: { accumulated_token_ids: [], max_trim_tokens: 0, tito_family: "qwen3", engine_api: "sglang-chat" },
  });
  const mine = await core.create("caller-id-1");
  assert.equal(bodyJson(mine), { session_id: "caller-id-1" });
  const dup = await core.create("caller-id-1");
  assert.is(dup.status, 409);
  assert.match(bodyJson(dup).error, "caller-id-1");
  assert.is((await core.create("../x")).status, 400);
  const del = await core.delete(id);
  assert.is(del.status, 204);
  assert.is(bodyText(del), "");
  for (const r of [
    await core.get(id),
    await core.delete(id),
    await core.chat(id, chatReq({ messages: [{ role: "user", content: "x" }] })),
  ]) {
    assert.is(r.status, 404);
    assert.equal(bodyJson(r), { error: `session not found: session_id=${id}`, code: "TITO_ERR_SESSION_NOT_FOUND" });
  }
  await core.delete("caller-id-1");
});

test("a multi-turn tool loop: prompts extend the accumulated ids + newline; no non-assistant drift", async () => {
  const id = await newSession();
  const messages: WireMessage[] = [
    { role: "system", content: "You are a weather bot." },
    { role: "user", content: "What is the weather in Paris?" },
  ];
  let previous: number[] = [];
  let toolCalls = 0;
  for (let turn = 0; turn < 6; turn++) {
    const r = await core.chat(id, chatReq({ model: "m", messages, tools: [WEATHER_TOOL] }));
    assert.is(r.status, 200, bodyText(r));
    const reply = bodyJson(r).choices[0].message;
    const got = bodyJson(await core.get(id));
    assert.is(got.records.length, turn + 1);
    const record = got.records[turn];
    assert.is(record.status_code, 200);
    assert.is(record.path, "/v1/chat/completions");
    assert.ok(typeof record.timestamp === "number");
    assert.is(record.request.logprobs, true);
    assert.is(record.request.return_meta_info, true);
    assert.is(record.request.no_stop_trim, false);
    assert.equal(record.request.messages, messages, "messages are sent along with input_ids");
    const promptIds: number[] = record.request.input_ids;
    if (turn > 0) {
      assert.equal(promptIds.slice(0, previous.length), previous, `turn ${turn} re-tokenized earlier ids`);
      assert.is(promptIds[previous.length], NL);
    }
    const completion = record.response.choices[0].meta_info.output_token_logprobs.map((e: number[]) => e[1]);
    assert.equal(got.metadata.accumulated_token_ids, [...promptIds, ...completion]);
    const mismatch = got.metadata.tito_session_mismatch as Array<{ type: string }>;
    assert.ok(Array.isArray(mismatch));
    assert.equal(
      mismatch.filter((m) => m.type !== "assistant_text"),
      [],
      JSON.stringify(mismatch),
    );
    previous = got.metadata.accumulated_token_ids;
    messages.push(reply);
    if (reply.tool_calls?.length) {
      toolCalls++;
      messages.push({ role: "tool", tool_call_id: reply.tool_calls[0].id, content: `{"temp": ${20 + turn}}` });
    } else {
      messages.push({ role: "user", content: `Thanks. And tomorrow (${turn})?` });
    }
  }
  assert.ok(toolCalls >= 2, "the loop exercised tool calls");
  await core.delete(id);
});

test("one-step rollback through the core truncates records; two steps are refused", async () => {
  const id = await newSession();
  const m1 = [{ role: "user", content: "Weather in Rome?" }];
  const r1 = bodyJson(await core.chat(id, chatReq({ messages: m1, tools: [WEATHER_TOOL] }))).choices[0].message;
  const m2 = [...m1, r1, { role: "tool", tool_call_id: r1.tool_calls[0].id, content: "sunny" }];
  const r2 = bodyJson(await core.chat(id, chatReq({ messages: m2, tools: [WEATHER_TOOL] }))).choices[0].message;
  const m3 = [...m2, r2, { role: "user", content: "And Oslo?" }];
  assert.is((await core.chat(id, chatReq({ messages: m3, tools: [WEATHER_TOOL] }))).status, 200);
  // Retry turn 3 with another question: one turn discarded.
  const retry = [...m2, r2, { role: "user", content: "And Bergen?" }];
  assert.is((await core.chat(id, chatReq({ messages: retry, tools: [WEATHER_TOOL] }))).status, 200);
  let got = bodyJson(await core.get(id));
  assert.is(got.records.length, 3);
  assert.equal(got.records[2].request.messages.at(-1).content, "And Bergen?");
  // Changing turn 2's tool result would discard turns 2 and 3.
  const tooFar = [...m1, r1, { role: "tool", tool_call_id: r1.tool_calls[0].id, content: "rain" }];
  const refused = await core.chat(id, chatReq({ messages: tooFar, tools: [WEATHER_TOOL] }));
  assert.is(refused.status, 400);
  assert.match(bodyJson(refused).error, /^rollback failed: /);
  got = bodyJson(await core.get(id));
  assert.is(got.records.length, 3, "a refused request changes nothing");
  await core.delete(id);
});

test("bad requests: invalid JSON, no messages, appended assistant", async () => {
  const id = await newSession();
  const bad = await core.chat(id, chatReq("{not json"));
  assert.is(bad.status, 400);
  assert.match(bodyJson(bad).error, /^invalid JSON body: /);
  assert.is((await core.chat(id, chatReq({ model: "m" }))).status, 400);
  const m1 = [{ role: "user", content: "hi" }];
  const r1 = bodyJson(await core.chat(id, chatReq({ messages: m1 }))).choices[0].message;
  const wrongRole = await core.chat(id, chatReq({ messages: [...m1, r1, { role: "assistant", content: "me again" }] }));
  assert.is(wrongRole.status, 400);
  assert.match(bodyJson(wrongRole).error, "index 2");
  assert.match(bodyJson(wrongRole).error, "['tool', 'user']");
  await core.delete(id);
});

test("R3 payloads are removed from the client reply and kept in the record", async () => {
  const id = await newSession(replayCore);
  const r = await replayCore.chat(id, chatReq({ messages: [{ role: "user", content: "hi" }] }));
  assert.is(r.status, 200);
  const client = bodyJson(r);
  assert.ok(client.choices[0].meta_info.output_token_logprobs.length > 0);
  assert.not.ok("routed_experts" in client.choices[0].meta_info);
  const record = bodyJson(await replayCore.get(id)).records[0];
  assert.is(record.request.return_routed_experts, true);
  assert.is(typeof record.response.choices[0].meta_info.routed_experts, "string");
  assert.is(Buffer.from(record.response.choices[0].meta_info.routed_experts, "base64").length, 3000);
  await replayCore.delete(id);
});

test("two concurrent chats on one session: both answered, one state update", async () => {
  const id = await newSession();
  const req = chatReq({ messages: [{ role: "user", content: "hello" }] });
  const [a, b] = await Promise.all([core.chat(id, req), core.chat(id, req)]);
  assert.is(a.status, 200);
  assert.is(b.status, 200);
  const got = bodyJson(await core.get(id));
  assert.is(got.records.length, 1, "the second update was skipped: its snapshot was stale");
  const completion = got.records[0].response.choices[0].meta_info.output_token_logprobs.map((e: number[]) => e[1]);
  assert.equal(got.metadata.accumulated_token_ids, [...got.records[0].request.input_ids, ...completion]);
  await core.delete(id);
});

test("a message whose role the chat API does not define is a 400 with its code; the engine never sees it", async () => {
  const id = await newSession();
  let asked = 0;
  gate = async () => void asked++;
  try {
    for (const role of ["bogus", "function", "ipython", "User"]) {
      const r = await core.chat(
        id,
        chatReq({
          messages: [
            { role: "system", content: "s" },
            { role, content: "x" },
          ],
        }),
      );
      assert.is(r.status, 400, role);
      assert.equal(bodyJson(r), {
        error: `messages[1].role must be one of system, developer, user, assistant, tool, got ${JSON.stringify(role)}`,
        code: "TITO_ERR_INVALID_CHAT_REQUEST",
      });
    }
    assert.is(asked, 0, "nothing reached the engine");
    assert.equal(bodyJson(await core.get(id)).records, [], "nothing recorded");
  } finally {
    gate = undefined;
    await core.delete(id);
  }
});

test("DELETE while a chat is at the engine: 204, the reply still returned, no update", async () => {
  const id = await newSession();
  let arrived!: () => void;
  const atEngine = new Promise<void>((r) => (arrived = r));
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  gate = async () => {
    arrived();
    await released;
  };
  try {
    const chat = core.chat(id, chatReq({ messages: [{ role: "user", content: "slow" }] }));
    await atEngine;
    const del = await core.delete(id);
    assert.is(del.status, 204, "DELETE does not wait behind the engine call");
    release();
    const r = await chat;
    assert.is(r.status, 200);
    assert.is(bodyJson(r).choices[0].message.role, "assistant");
    assert.is((await core.get(id)).status, 404);
    assert.is(core.sessionCount(), 0);
  } finally {
    gate = undefined;
  }
});

test("proxy passes through, needs no session, refuses escaping paths", async () => {
  const r = await core.proxy("no-such-session", {
    method: "GET",
    path: "/v1/models",
    query: "x=1",
    headers: {},
    body: Buffer.alloc(0),
  });
  assert.is(r.status, 200);
  assert.is(bodyJson(r).data[0].id, "tito-sim");
  const missing = await core.proxy("s", {
    method: "GET",
    path: "/nope",
    query: "",
    headers: {},
    body: Buffer.alloc(0),
  });
  assert.is(missing.status, 404);
  for (const path of ["/../health", "/v1/%2e%2e/x", "/v1/%2E%2E", "/a/..%2fb", "/a/%252e%252e/b", "/a\\..\\b"]) {
    const bad = await core.proxy("s", { method: "GET", path, query: "", headers: {}, body: Buffer.alloc(0) });
    assert.is(bad.status, 400, path);
    assert.match(bodyJson(bad).error, "escape the engine root");
  }
});

test("an unreachable engine is a 502 naming the cause", async () => {
  const port = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
  const dead = coreFor({ engineUrl: `http://127.0.0.1:${port}`, tokenizerFolder: folder });
  try {
    const id = await newSession(dead);
    const r = await dead.chat(id, chatReq({ messages: [{ role: "user", content: "hi" }] }));
    assert.is(r.status, 502);
    assert.match(bodyJson(r).error, /engine unreachable .*ECONNREFUSED/);
    assert.is(bodyJson(await dead.get(id)).records.length, 0);
    const p = await dead.proxy(id, {
      method: "GET",
      path: "/v1/models",
      query: "",
      headers: {},
      body: Buffer.alloc(0),
    });
    assert.is(p.status, 502);
  } finally {
    await dead.close();
  }
});

test.run();
