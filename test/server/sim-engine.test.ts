// The simulated engine over real sockets: replies, tool calls, input_ids vs messages,
// routed_experts, truncation, determinism, the pre-built mode, and the CLI as a child.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { renderChat, type ChatMessage } from "../../sessions/chat-template.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { payloadByte } from "../../server/sim-engine/sim-engine-payload.ts";
import { countAssistantTurns, prebuiltReplies } from "../../bench/sim-engine-prebuilt.ts";
import { factsFromText, sampleArguments } from "../../server/sim-engine/sim-engine-reply.ts";
import type { ChatCompletion, ErrorBody, WireMessage } from "../helpers/bodies.ts";
import { qwen3 } from "../sessions/fixtures.ts";
import { TS_LOADER } from "../helpers/ts-loader.ts";

const qwen = qwen3();
const IM_END = qwen.tokenId("<|im_end|>")!;
const NEWLINE = qwen.encode("\n")[0];
const R3_BYTES = 3 * 1024 * 1024 + 2; // not a multiple of 3: exercises the base64 tail

const weather = {
  type: "function",
  function: {
    name: "get_weather",
    parameters: {
      type: "object",
      properties: { city: { type: "string" }, days: { type: "integer" } },
      required: ["city"],
    },
  },
};
const clock = { type: "function", function: { name: "get_time", parameters: { type: "object", properties: {} } } };
const tools = [weather, clock];

let engine: SimEngine;
let always: SimEngine;
let prebuilt: SimEngine;
let child: ChildProcess | undefined;
let gate: { entered: (body: unknown) => void; release: Promise<void> } | undefined;

test.before(async () => {
  engine = await startSimEngine({
    tokenizerFolder: qwen,
    routedExpertsBytes: 1000,
    beforeReply: async (body) => {
      if (!gate) return;
      gate.entered(body);
      await gate.release;
    },
  });
  always = await startSimEngine({
    tokenizerFolder: qwen,
    routedExpertsBytes: R3_BYTES,
    alwaysRoutedExperts: true,
    latencyMs: 1,
  });
  prebuilt = await startSimEngine({
    tokenizerFolder: qwen,
    rawReplies: prebuiltReplies({
      completionTokens: 7,
      turns: 2,
      routedExpertsBytesByTurn: (k) => (k === 0 ? 0 : k * 1000 + 1),
    }),
  });
});

test.after(async () => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await Promise.all([engine?.close(), always?.close(), prebuilt?.close()]);
});

async function post<Body = ChatCompletion>(
  e: SimEngine,
  body: unknown,
  path = "/v1/chat/completions",
): Promise<{ status: number; text: string; json: Body }> {
  const res = await fetch(e.url + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, json: JSON.parse(text) as Body };
}

async function chat(e: SimEngine, body: unknown): Promise<ChatCompletion> {
  const res = await post(e, body);
  assert.is(res.status, 200, res.text);
  return res.json;
}

function completionIds(json: ChatCompletion): number[] {
  const meta = json.choices[0].meta_info;
  assert.is(meta.output_token_logprobs.length, meta.completion_tokens);
  for (const [logprob] of meta.output_token_logprobs) assert.ok(logprob < 0, `logprob ${logprob} < 0`);
  return meta.output_token_logprobs.map((pair: number[]) => pair[1]);
}

/** The response minus what may differ between two identical requests. */
function stable(json: ChatCompletion) {
  const { id: _id, created: _created, ...copy } = structuredClone(json);
  const choices = copy.choices.map(({ meta_info: { id: _metaId, ...meta }, ...choice }) => ({
    ...choice,
    meta_info: meta,
  }));
  return { ...copy, choices };
}

const promptIds = (messages: ChatMessage[], withTools = true) =>
  qwen.encode(renderChat(qwen, messages, { tools: withTools ? tools : undefined, addGenerationPrompt: true }));

test("plain reply: text, ids that decode to it plus <|im_end|>, SGLang meta_info", async () => {
  const messages = [{ role: "user", content: "hello there" }];
  const json = await chat(engine, { messages });
  const choice = json.choices[0];
  assert.is(json.object, "chat.completion");
  assert.is(choice.message.role, "assistant");
  assert.match(choice.message.content, /^Turn 1: \S/);
  assert.not.ok("tool_calls" in choice.message);
  assert.is(choice.finish_reason, "stop");
  assert.equal(choice.meta_info.finish_reason, { type: "stop", matched: IM_END });
  assert.is(choice.meta_info.prompt_tokens, promptIds(messages, false).length);
  assert.not.ok("routed_experts" in choice.meta_info);
  const ids = completionIds(json);
  assert.is(ids[ids.length - 1], IM_END);
  assert.is(qwen.decode(ids), `${choice.message.content}<|im_end|>`);
  assert.equal(json.usage, {
    prompt_tokens: choice.meta_info.prompt_tokens,
    completion_tokens: ids.length,
    total_tokens: choice.meta_info.prompt_tokens + ids.length,
  });
});

test("with tools and a user turn last: calls the first tool in the Qwen format", async () => {
  const json = await chat(engine, { messages: [{ role: "user", content: "weather in Paris?" }], tools });
  const choice = json.choices[0];
  assert.is(choice.message.content, "");
  assert.is(choice.finish_reason, "tool_calls");
  assert.is(choice.message.tool_calls!.length, 1);
  const call = choice.message.tool_calls![0];
  assert.is(call.type, "function");
  assert.type(call.id, "string");
  assert.is(call.function.name, "get_weather");
  assert.equal(JSON.parse(call.function.arguments), { city: "value", days: 1 });
  assert.is(
    qwen.decode(completionIds(json)),
    `<tool_call>\n{"name": "get_weather", "arguments": {"city": "value", "days": 1}}\n</tool_call><|im_end|>`,
  );
});

test("after a tool result: a plain text reply for the next turn", async () => {
  const first = await chat(engine, { messages: [{ role: "user", content: "weather?" }], tools });
  const messages = [
    { role: "user", content: "weather?" },
    { role: "assistant", content: "", tool_calls: first.choices[0].message.tool_calls },
    { role: "tool", content: "sunny, 21 C" },
  ];
  const json = await chat(engine, { messages, tools });
  assert.not.ok("tool_calls" in json.choices[0].message);
  assert.match(json.choices[0].message.content, /^Turn 2: /);
  assert.is(json.choices[0].finish_reason, "stop");
});

test("input_ids gives the same reply as messages for the same conversation", async () => {
  const conversations: ChatMessage[][] = [
    [{ role: "user", content: "hello there" }],
    [
      { role: "system", content: "be brief" },
      { role: "user", content: "weather?" },
    ],
    [
      { role: "user", content: "weather?" },
      {
        role: "assistant",
        content: "",
        tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: { city: "Oslo" } } }],
      },
      { role: "tool", content: "rain" },
    ],
  ];
  for (const messages of conversations) {
    for (const body of [{ messages }, { messages, tools }]) {
      const viaMessages = await chat(engine, body);
      const viaIds = await chat(engine, { ...body, input_ids: promptIds(messages, "tools" in body) });
      assert.equal(stable(viaIds), stable(viaMessages));
    }
  }
});

test("input_ids: the decision comes from the decoded prompt, turn by turn", async () => {
  // What the session server sends: the previous ids + completion + newline + the new segment.
  const first = [{ role: "user", content: "weather?" }];
  const ids1 = promptIds(first);
  const turn1 = await chat(engine, { input_ids: ids1, tools });
  assert.is(turn1.choices[0].message.tool_calls![0].function.name, "get_weather");
  const acc = [...ids1, ...completionIds(turn1), NEWLINE];
  const tool = qwen.encode(
    "<|im_start|>user\n<tool_response>\nrain\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
  );
  const turn2 = await chat(engine, { input_ids: [...acc, ...tool], tools });
  assert.not.ok("tool_calls" in turn2.choices[0].message);
  assert.match(turn2.choices[0].message.content, /^Turn 2: /);
  const user = qwen.encode("<|im_start|>user\nand tomorrow?<|im_end|>\n<|im_start|>assistant\n");
  const turn2b = await chat(engine, { input_ids: [...acc, ...user], tools });
  assert.is(turn2b.choices[0].message.tool_calls![0].function.name, "get_weather");
});

test("factsFromText and sampleArguments", () => {
  assert.equal(factsFromText("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"), {
    turn: 0,
    afterToolResult: false,
  });
  assert.equal(
    factsFromText(
      "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nok<|im_end|>\n<|im_start|>user\n<tool_response>\nx\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    ),
    { turn: 1, afterToolResult: true },
  );
  assert.equal(factsFromText("no chat markup"), { turn: 0, afterToolResult: false });
  assert.equal(
    sampleArguments({
      properties: {
        a: { type: "string", enum: ["x", "y"] },
        b: { type: "boolean" },
        c: { type: ["number", "null"] },
        d: { type: "array" },
        e: {},
      },
    }),
    { a: "x", b: true, c: 1, d: [], e: "value" },
  );
  assert.equal(sampleArguments(undefined), {});
});

test("routed_experts only when asked or configured, with the configured size and bytes", async () => {
  const messages = [{ role: "user", content: "hello" }];
  const off = await chat(engine, { messages });
  assert.not.ok("routed_experts" in off.choices[0].meta_info);
  const on = await chat(engine, { messages, return_routed_experts: true });
  const bytes = Buffer.from(on.choices[0].meta_info.routed_experts!, "base64");
  assert.is(bytes.length, 1000);
  assert.ok(bytes.every((b, i) => b === payloadByte(i)));
  // Always on, several MiB, streamed as chunks: still one valid JSON body.
  const big = await chat(always, { messages });
  const bigBytes = Buffer.from(big.choices[0].meta_info.routed_experts!, "base64");
  assert.is(bigBytes.length, R3_BYTES);
  assert.is(bigBytes[R3_BYTES - 1], payloadByte(R3_BYTES - 1));
  assert.is(bigBytes[R3_BYTES - 2], payloadByte(R3_BYTES - 2));
});

test("max_tokens / max_completion_tokens truncate the completion (finish reason length)", async () => {
  const messages = [{ role: "user", content: "hello there" }];
  const full = completionIds(await chat(engine, { messages }));
  const cut = await chat(engine, { messages, max_tokens: 3 });
  assert.equal(completionIds(cut), full.slice(0, 3));
  assert.is(cut.choices[0].finish_reason, "length");
  assert.equal(cut.choices[0].meta_info.finish_reason, { type: "length", length: 3 });
  assert.is(cut.choices[0].message.content, qwen.decode(full.slice(0, 3)));
  const wins = await chat(engine, { messages, max_tokens: 3, max_completion_tokens: 2 });
  assert.is(wins.choices[0].meta_info.completion_tokens, 2);
  const roomy = await chat(engine, { messages, max_tokens: full.length });
  assert.is(roomy.choices[0].finish_reason, "stop");
  const call = await chat(engine, { messages, tools, max_tokens: 4 });
  assert.not.ok("tool_calls" in call.choices[0].message);
  assert.is(call.choices[0].finish_reason, "length");
  assert.is(call.choices[0].message.content, qwen.decode(completionIds(call)));
});

test("deterministic: the same input gives the same bytes but for id and created", async () => {
  const body = { messages: [{ role: "user", content: "same question" }], tools };
  const a = await post(engine, body);
  const b = await post(engine, body);
  assert.is.not(a.json.id, b.json.id);
  assert.is(
    a.text.replaceAll(a.json.id, "ID").replace(/"created":\d+/, ""),
    b.text.replaceAll(b.json.id, "ID").replace(/"created":\d+/, ""),
  );
  const other = await chat(engine, { messages: [{ role: "user", content: "another question" }] });
  const again = await chat(engine, {
    messages: [
      { role: "user", content: "another question" },
      { role: "assistant", content: "x" },
      { role: "user", content: "more" },
    ],
  });
  assert.match(other.choices[0].message.content, /^Turn 1: /);
  assert.match(again.choices[0].message.content, /^Turn 2: /);
  // The sentence depends on the prompt, not only on the turn.
  const sentences = new Set<string>();
  for (let i = 0; i < 8; i++)
    sentences.add(
      (await chat(engine, { messages: [{ role: "user", content: `question ${i}` }] })).choices[0].message.content,
    );
  assert.ok(sentences.size > 1, `different prompts, different replies: ${[...sentences]}`);
});

test("errors: 400 without messages/input_ids, bad JSON; 404 JSON elsewhere", async () => {
  const none = await post<ErrorBody>(engine, { model: "x" });
  assert.is(none.status, 400);
  assert.match(none.json.error, /messages.*input_ids/);
  const bad = await post<ErrorBody>(engine, "{not json");
  assert.is(bad.status, 400);
  assert.type(bad.json.error, "string");
  const badIds = await post(engine, { input_ids: ["a"] });
  assert.is(badIds.status, 400);
  const missing = await fetch(`${engine.url}/v1/nothing`);
  assert.is(missing.status, 404);
  assert.match((await missing.json()).error, /not found/);
  assert.is((await post(engine, {}, "/v1/embeddings")).status, 404);
});

test("health, models, request count, large bodies", async () => {
  const health = await fetch(`${engine.url}/health`);
  assert.is(health.status, 200);
  await health.arrayBuffer();
  const models = await (await fetch(`${engine.url}/v1/models`)).json();
  assert.is(models.data.length, 1);
  assert.is(models.data[0].id, "tito-sim");
  const before = engine.requests;
  // 24 MiB: far above Fastify's 1 MiB default body limit.
  await chat(engine, { messages: [{ role: "user", content: "hi" }], padding: "x".repeat(24 * 1024 * 1024) });
  assert.is(engine.requests, before + 1);
});

test("beforeReply holds the reply until released and sees the body", async () => {
  let release!: () => void;
  let entered!: (body: unknown) => void;
  const inside = new Promise<unknown>((resolve) => (entered = resolve));
  gate = { entered, release: new Promise<void>((resolve) => (release = resolve)) };
  let settled = false;
  const pending = chat(engine, { messages: [{ role: "user", content: "gated" }] }).finally(() => (settled = true));
  const seen = (await inside) as { messages: WireMessage[] };
  gate = undefined;
  assert.is(seen.messages[0].content, "gated");
  assert.not.ok(settled, "the reply waited for the gate");
  release();
  assert.match((await pending).choices[0].message.content, /^Turn 1: /);
});

test("countAssistantTurns scans raw JSON for assistant roles only", () => {
  assert.is(countAssistantTurns(Buffer.from('{"messages":[{"role":"user","content":"\\"assistant\\""}]}')), 0);
  assert.is(
    countAssistantTurns(Buffer.from('{"messages":[{"role":"assistant"},{"role" :\n "assistant","x":"assistant"}]}')),
    2,
  );
  assert.is(countAssistantTurns(Buffer.from('"assistant"')), 0);
});

test("pre-built mode: fixed replies per turn, N tokens ending in <|im_end|>, sized routed_experts", async () => {
  const turn0 = await post(prebuilt, { messages: [{ role: "user", content: "x" }], input_ids: [1, 2, 3] });
  const ids = completionIds(turn0.json);
  assert.is(ids.length, 7);
  assert.is(ids[6], IM_END);
  assert.is(turn0.json.choices[0].message.content, qwen.decode(ids.slice(0, 6)));
  assert.not.ok("routed_experts" in turn0.json.choices[0].meta_info);
  const history = (k: number) => ({
    messages: [
      { role: "user", content: "q" },
      ...Array.from({ length: k }, () => [
        { role: "assistant", content: "a" },
        { role: "user", content: "q" },
      ]).flat(),
    ],
  });
  const turn2 = await post(prebuilt, history(2));
  assert.is(Buffer.from(turn2.json.choices[0].meta_info.routed_experts!, "base64").length, 2001);
  assert.is(
    Buffer.from((await chat(prebuilt, history(3))).choices[0].meta_info.routed_experts!, "base64").length,
    3001,
  );
  assert.is((await post(prebuilt, history(2))).text, turn2.text, "the same bytes every time");
  assert.is((await post(prebuilt, "not even json")).status, 200, "the pre-built mode never parses");
});

test("engine-main: a real child process prints the ready line and serves /health", async () => {
  const main = fileURLToPath(new URL("../../server/sim-engine/engine-main.ts", import.meta.url));
  const proc = spawn(process.execPath, [...TS_LOADER, main, "--port", "0", "--latency-ms", "1"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  child = proc;
  const exited = once(proc, "exit");
  const lines = createInterface({ input: proc.stdout! });
  let url: string | undefined;
  for await (const line of lines) {
    const match = /^sim-engine ready url=(http:\/\/127\.0\.0\.1:\d+)$/.exec(line);
    if (match) {
      url = match[1];
      break;
    }
  }
  assert.ok(url, "ready line printed");
  const health = await fetch(`${url}/health`);
  assert.is(health.status, 200);
  assert.equal(await health.json(), { status: "ok" });
  proc.kill("SIGTERM");
  const [code, signal] = await exited;
  assert.is(code, 0);
  assert.is(signal, null);
});

test.run();
