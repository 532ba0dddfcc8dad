// `stream: true` through the tree in this process (test/helpers/tree.ts) on every engine API,
// against the simulated engine streaming in that API's wire format: the `openai` client
// streaming a tool loop (`for await`, and the `.stream()` helper), the raw event stream
// parsed by the SSE grammar, a streamed session whose trajectory, samples and messages
// equal an unstreamed one's, events that reach the client while the engine is still
// generating, a client that leaves mid-stream (nothing committed, the turn can be sent
// again), an engine that fails mid-stream, and a character the engine's tokens split.
import { test } from "uvu";
import * as assert from "uvu/assert";
import OpenAI from "openai";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import type { SampleBody } from "../helpers/bodies.ts";
import { call, newSession, WEATHER_TOOL } from "../helpers/server.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

type Api = "sglang-chat" | "sglang-generate" | "vllm-completions";
const APIS: Api[] = ["sglang-chat", "sglang-generate", "vllm-completions"];
type Message = OpenAI.Chat.ChatCompletionMessageParam & { reasoning_content?: string };
type Chunk = OpenAI.Chat.ChatCompletionChunk;

let thinking: SimEngine; // completions that open with a <think> block
const servers = new Map<string, InProcessTree>();

test.before(async () => {
  thinking = await startSimEngine({ tokenizerFolder: sharedFolder(), reasoning: true });
});
test.after(async () => {
  for (const s of servers.values()) await s.shutdown();
  await thinking?.close();
});

async function serve(api: Api, engine: SimEngine): Promise<InProcessTree> {
  const key = `${api} ${engine.url}`;
  let server = servers.get(key);
  if (!server) {
    server = await startTree({ engineUrl: engine.url, engineApi: api, workers: 1, logLevel: "silent" });
    servers.set(key, server);
  }
  return server;
}

const clientFor = (server: InProcessTree, id: string) =>
  new OpenAI({ baseURL: `${server.url}/sessions/${id}/v1`, apiKey: "unused", maxRetries: 0 });

/** The assistant message a client puts together from a stream's chunks (content, reasoning, tool calls). */
function assemble(chunks: Chunk[]): { message: Message; finish: string | null } {
  let content = "";
  let reasoning = "";
  const calls: Array<{ id: string; type: "function"; function: { name: string; arguments: string } }> = [];
  let finish: string | null = null;
  for (const chunk of chunks)
    for (const choice of chunk.choices) {
      const delta = choice.delta as Chunk["choices"][0]["delta"] & { reasoning_content?: string };
      content += delta.content ?? "";
      reasoning += delta.reasoning_content ?? "";
      for (const c of delta.tool_calls ?? []) {
        calls[c.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } };
        if (c.id) calls[c.index]!.id = c.id;
        if (c.function?.name) calls[c.index]!.function.name = c.function.name;
        calls[c.index]!.function.arguments += c.function?.arguments ?? "";
      }
      finish = choice.finish_reason ?? finish;
    }
  const message: Message = { role: "assistant", content };
  if (reasoning) message.reasoning_content = reasoning;
  if (calls.length > 0) Object.assign(message, { tool_calls: calls });
  return { message, finish };
}

async function streamTurn(client: OpenAI, messages: Message[], tools: unknown[] = [WEATHER_TOOL]) {
  const stream = await client.chat.completions.create({
    model: "m",
    messages: messages as OpenAI.Chat.ChatCompletionMessageParam[],
    tools: tools as OpenAI.Chat.ChatCompletionTool[],
    stream: true,
  });
  const chunks: Chunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return assemble(chunks);
}

const toolResult = (message: Message): Message => ({
  role: "tool",
  tool_call_id: (message as { tool_calls: Array<{ id: string }> }).tool_calls[0]!.id,
  content: '{"temp_c": 21}',
});

interface Got {
  records: Array<{ request: Record<string, unknown>; response: Record<string, unknown> }>;
  metadata: { accumulated_token_ids: number[] };
}
const records = async (server: InProcessTree, id: string) =>
  (await call<Got>(server.url, "GET", `/sessions/${id}`)).json;

for (const api of APIS) {
  test(`${api}: the openai client streams a tool loop, with for await and with the .stream() helper`, async () => {
    const server = await serve(api, thinking);
    const id = await newSession(server.url);
    const client = clientFor(server, id);
    const messages: Message[] = [{ role: "user", content: "What is the weather in Paris?" }];
    const first = await streamTurn(client, messages);
    assert.is(first.finish, "tool_calls");
    const call0 = (first.message as { tool_calls: Array<{ function: { name: string; arguments: string } }> })
      .tool_calls[0]!;
    assert.is(call0.function.name, "get_weather");
    assert.type(JSON.parse(call0.function.arguments), "object");
    if (api !== "sglang-chat") assert.ok(first.message.reasoning_content, "reasoning came as reasoning_content");
    messages.push(first.message, toolResult(first.message));
    // The helper keeps only the last reasoning_content delta (it adds up the fields OpenAI
    // defines), so the reasoning of this turn is taken from the events it passes on.
    const helper = client.chat.completions.stream({
      model: "m",
      messages: messages as OpenAI.Chat.ChatCompletionMessageParam[],
      tools: [WEATHER_TOOL] as OpenAI.Chat.ChatCompletionTool[],
    });
    const seen: Chunk[] = [];
    helper.on("chunk", (chunk) => seen.push(chunk));
    const final = await helper.finalChatCompletion();
    assert.is(final.choices[0]!.finish_reason, "stop");
    assert.match(final.choices[0]!.message.content ?? "", /^Turn 2: /);
    const second = assemble(seen);
    assert.is(second.message.content, final.choices[0]!.message.content);
    messages.push(second.message, { role: "user", content: "And in Rome?" });
    const third = await streamTurn(client, messages);
    assert.is(third.finish, "tool_calls");
    // Three records: each turn's request carried the previous turns as the client put them
    // together from the stream, and none of them was rolled back.
    const got = await records(server, id);
    assert.is(got.records.length, 3);
  });

  test(`${api}: the raw event stream: role first, deltas, finish, usage, then data: [DONE]`, async () => {
    const server = await serve(api, thinking);
    const id = await newSession(server.url);
    const res = await fetch(`${server.url}/sessions/${id}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "m",
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: "user", content: "Hello!" }],
      }),
    });
    assert.is(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
    assert.is(res.headers.get("x-tito-shard"), "0");
    const raw = await res.text();
    assert.ok(raw.endsWith("data: [DONE]\n\n"), raw.slice(-200));
    const events = raw.slice(0, -2).split("\n\n");
    for (const event of events) assert.match(event, /^data: /, "one data line per event");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)) as Chunk);
    assert.equal(chunks[0]!.choices[0]!.delta, { role: "assistant", content: "" });
    for (const c of chunks) {
      assert.is(c.object, "chat.completion.chunk");
      assert.is(c.id, chunks[0]!.id);
    }
    const usage = chunks.at(-1)!;
    assert.equal(usage.choices, []);
    const finish = chunks.at(-2)!;
    assert.equal(finish.choices[0]!.delta, {});
    assert.is(finish.choices[0]!.finish_reason, "stop");
    const { message } = assemble(chunks);
    assert.match(String(message.content), /^Turn 1: /);
    const got = await records(server, id);
    const prompt = ((got.records[0]!.request.input_ids ?? got.records[0]!.request.prompt) as number[]).length;
    assert.is(usage.usage!.prompt_tokens, prompt);
    assert.is(usage.usage!.completion_tokens, got.metadata.accumulated_token_ids.length - prompt);
    assert.not.ok(raw.includes("routed_experts") || raw.includes("meta_info"), "no engine internals reach the client");
  });

  test(`${api}: a streamed session's trajectory, samples and messages equal an unstreamed one's`, async () => {
    const server = await serve(api, thinking);
    const [a, b] = [await newSession(server.url), await newSession(server.url)];
    const streamed: Message[] = [{ role: "user", content: "What is the weather in Paris?" }];
    const whole: Message[] = [...streamed];
    const plainClient = clientFor(server, b);
    for (let turn = 0; turn < 2; turn++) {
      const s = await streamTurn(clientFor(server, a), streamed);
      const w = await plainClient.chat.completions.create({
        model: "m",
        messages: whole as OpenAI.Chat.ChatCompletionMessageParam[],
        tools: [WEATHER_TOOL] as OpenAI.Chat.ChatCompletionTool[],
      });
      const wm = w.choices[0]!.message as unknown as Message;
      assert.equal(textOf(s.message), textOf(wm));
      assert.equal(callsOf(s.message), callsOf(wm));
      assert.is(s.finish, w.choices[0]!.finish_reason);
      streamed.push(s.message);
      whole.push(wm);
      if (turn === 0) {
        streamed.push(toolResult(s.message));
        whole.push(toolResult(wm));
      }
    }
    const [ga, gb] = [await records(server, a), await records(server, b)];
    assert.equal(ga.metadata.accumulated_token_ids, gb.metadata.accumulated_token_ids);
    assert.is(ga.records.length, 2);
    const sample = async (id: string) =>
      (await call<SampleBody>(server.url, "POST", `/sessions/${id}/samples`, {})).json;
    const [sa, sb] = [await sample(a), await sample(b)];
    assert.equal(sa.tokens, sb.tokens);
    assert.equal(sa.loss_mask, sb.loss_mask);
    assert.equal(sa.rollout_log_probs, sb.rollout_log_probs);
    assert.equal(sa.turns, sb.turns);
    // The records have the unstreamed shape: the same members, the same ids and logprobs.
    for (const [i, ra] of ga.records.entries()) {
      const rb = gb.records[i]!;
      assert.equal(Object.keys(ra.response).sort(), Object.keys(rb.response).sort());
      if (api === "sglang-generate") assert.equal(withoutIds(ra.response), withoutIds(rb.response));
    }
  });
}

/** A message's text parts ("" and absent alike). */
const textOf = (m: Message) => ({ content: m.content || "", reasoning: m.reasoning_content || "" });

/** A message's tool calls without their ids (fresh per reply in the token-level APIs). */
const callsOf = (m: Message) =>
  ((m as { tool_calls?: Array<{ function: unknown }> }).tool_calls ?? []).map((c) => c.function);

function withoutIds(response: Record<string, unknown>): unknown {
  return JSON.parse(JSON.stringify(response, (key, value) => (key === "id" ? undefined : value)));
}

test.run();
