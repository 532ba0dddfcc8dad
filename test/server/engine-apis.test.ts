// Every engine API through the tree in this process (test/helpers/tree.ts) with the
// `openai` client, against the simulated engine speaking that API: a multi-turn tool loop
// in which every prompt extends the previous prompt plus its completion, samples whose
// completions and logprobs are the engine's, reasoning split out of the text, finish
// reasons, routing replay over /generate. A session that survives its worker's restart is
// test/server/engine-apis-restart.test.ts (real processes).
import { test } from "uvu";
import * as assert from "uvu/assert";
import OpenAI from "openai";
import { createServer, type Server } from "node:http";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { qwen3 } from "../sessions/fixtures.ts";
import type { SampleBody } from "../helpers/bodies.ts";
import { call, newSession, WEATHER_TOOL } from "../helpers/server.ts";
import { recordIds, type RawRecord } from "../helpers/turn-records.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

type Api = "sglang-chat" | "sglang-generate" | "vllm-completions";
const APIS: Api[] = ["sglang-chat", "sglang-generate", "vllm-completions"];

let engine: SimEngine;
let thinking: SimEngine;
const servers: InProcessTree[] = [];

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: sharedFolder() });
  thinking = await startSimEngine({ tokenizerFolder: sharedFolder(), reasoning: true });
});
test.after(async () => {
  for (const s of servers) await s.shutdown();
  await engine?.close();
  await thinking?.close();
});

async function serve(api: Api, engineUrl: string, extra: Record<string, unknown> = {}): Promise<InProcessTree> {
  const server = await startTree({ engineUrl, engineApi: api, workers: 1, ...extra });
  servers.push(server);
  return server;
}

for (const api of APIS) {
  test(`${api}: a tool loop with the openai client; every prompt extends the last; samples are the engine's`, async () => {
    const server = await serve(api, engine.url);
    const id = await newSession(server.url);
    const client = new OpenAI({ baseURL: `${server.url}/sessions/${id}/v1`, apiKey: "unused" });
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: "system", content: "You are helpful." },
      { role: "user", content: "What is the weather in Paris?" },
    ];
    const tools = [WEATHER_TOOL] as OpenAI.Chat.ChatCompletionTool[];
    const first = await client.chat.completions.create({ model: "m", messages, tools });
    assert.is(first.choices[0]!.finish_reason, "tool_calls");
    const call0 = first.choices[0]!.message.tool_calls![0]! as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    assert.is(call0.function.name, "get_weather");
    assert.ok(typeof JSON.parse(call0.function.arguments) === "object");
    messages.push(first.choices[0]!.message, { role: "tool", tool_call_id: call0.id, content: '{"temp_c": 21}' });
    const second = await client.chat.completions.create({ model: "m", messages, tools });
    assert.is(second.choices[0]!.finish_reason, "stop");
    assert.ok(second.choices[0]!.message.content);
    assert.not.ok("meta_info" in second.choices[0]! && api !== "sglang-chat", "the server built the reply");

    const got = await call<{ records: RawRecord[]; metadata: { accumulated_token_ids: number[] } }>(
      server.url,
      "GET",
      `/sessions/${id}`,
    );
    assert.is(got.json.records.length, 2);
    const [r0, r1] = got.json.records.map(recordIds);
    assert.equal(r1!.prompt.slice(0, r0!.prompt.length + r0!.completion.length), [...r0!.prompt, ...r0!.completion]);
    assert.equal(got.json.metadata.accumulated_token_ids, [...r1!.prompt, ...r1!.completion]);
    if (api !== "sglang-chat") assert.not.ok("messages" in got.json.records[0]!.request, "the engine got ids only");

    const sample = await call<SampleBody>(server.url, "POST", `/sessions/${id}/samples`, {});
    assert.is(sample.status, 200, sample.text);
    assert.is(sample.json.turns.length, 2);
    for (const [i, r] of [r0!, r1!].entries()) {
      const turn = sample.json.turns[i]!;
      assert.equal(sample.json.tokens.slice(turn.completion_start, turn.completion_end), r.completion);
      // rollout_log_probs covers tokens[len - response_length:]
      const first = sample.json.tokens.length - sample.json.response_length;
      const logprobs = sample.json.rollout_log_probs.slice(turn.completion_start - first, turn.completion_end - first);
      assert.equal(logprobs, r.logprobs);
    }
  });
}

test("sglang-generate: routing replay stays in the record, never in the client's reply", async () => {
  const server = await serve("sglang-generate", engine.url, { routingReplay: true });
  const id = await newSession(server.url);
  const client = new OpenAI({ baseURL: `${server.url}/sessions/${id}/v1`, apiKey: "unused" });
  const reply = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "Hi" }] });
  assert.not.ok(JSON.stringify(reply).includes("routed_experts"));
  const got = await call<{ records: RawRecord[] }>(server.url, "GET", `/sessions/${id}`);
  const record = got.json.records[0]!;
  assert.is((record.request as { return_routed_experts?: boolean }).return_routed_experts, true);
  assert.is(typeof record.response.meta_info!.routed_experts, "string");
  assert.ok(record.response.meta_info!.routed_experts!.length > 1000);
});

for (const api of ["sglang-generate", "vllm-completions"] as const) {
  test(`${api}: reasoning is split out; a token limit is finish_reason length`, async () => {
    const server = await serve(api, thinking.url);
    const id = await newSession(server.url);
    const client = new OpenAI({ baseURL: `${server.url}/sessions/${id}/v1`, apiKey: "unused" });
    const reply = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "Hi" }] });
    const message = reply.choices[0]!.message as OpenAI.Chat.ChatCompletionMessage & { reasoning_content?: string };
    assert.ok(message.reasoning_content, "reasoning_content present");
    assert.not.match(message.content ?? "", /<think>|<\/think>|<\|im_end\|>/);
    assert.is(reply.choices[0]!.finish_reason, "stop");

    const other = await newSession(server.url);
    const cut = await new OpenAI({
      baseURL: `${server.url}/sessions/${other}/v1`,
      apiKey: "unused",
    }).chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 3,
    });
    assert.is(cut.choices[0]!.finish_reason, "length");
    assert.is(cut.usage!.completion_tokens, 3);
  });
}

/** A stand-in engine whose every completion is `text` (ids from the real tokenizer), for both token-level APIs. */
async function cannedEngine(text: string): Promise<{ url: string; server: Server }> {
  const folder = qwen3();
  const ids = [...folder.encode(text), folder.tokenId("<|im_end|>")!];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      // vllm-completions reads the served model and its context length first.
      if (req.url === "/v1/models")
        return void res.end(JSON.stringify({ object: "list", data: [{ id: "m", max_model_len: 40960 }] }));
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { input_ids?: number[]; prompt?: number[] };
      const reply =
        req.url === "/generate"
          ? {
              text,
              meta_info: {
                finish_reason: { type: "stop", matched: ids.at(-1) },
                prompt_tokens: body.input_ids!.length,
                completion_tokens: ids.length,
                output_token_logprobs: ids.map((id) => [-0.25, id, null]),
              },
            }
          : { choices: [{ index: 0, text, token_ids: ids, logprobs: null, finish_reason: "stop" }] };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(reply));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server };
}

for (const api of ["sglang-generate", "vllm-completions"] as const) {
  test(`${api}: a malformed tool call stays in the content and counts in the metric`, async () => {
    const broken = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>';
    const canned = await cannedEngine(broken);
    try {
      const server = await serve(api, canned.url);
      const id = await newSession(server.url);
      const client = new OpenAI({ baseURL: `${server.url}/sessions/${id}/v1`, apiKey: "unused" });
      const tools = [WEATHER_TOOL] as OpenAI.Chat.ChatCompletionTool[];
      const reply = await client.chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "Weather in Paris?" }],
        tools,
      });
      assert.is(reply.choices[0]!.finish_reason, "stop");
      assert.is(reply.choices[0]!.message.tool_calls, undefined);
      assert.is(reply.choices[0]!.message.content, broken);
      const metrics = await call(server.url, "GET", "/metrics");
      assert.match(metrics.text, /^tito_malformed_tool_calls_total\{[^}]*\} 1$/m);
    } finally {
      await new Promise<void>((r) => canned.server.close(() => r()));
    }
  });
}

test.run();
