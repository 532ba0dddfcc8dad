// The Anthropic Messages route with the official `@anthropic-ai/sdk` client, baseURL the
// session: a tool loop, streamed and not, through the in-process tree against the simulated
// engine (a thinking Qwen3 over /generate, so thinking blocks go round too), whose second prompt extends
// the first prompt plus its completion exactly, with the same records and samples as a
// chat session; stop reasons; errors in Anthropic's shape; one session, one API.
import { test } from "uvu";
import * as assert from "uvu/assert";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { call, newSession } from "../helpers/server.ts";
import { exactTrajectory } from "../helpers/turn-records.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

type Api = "sglang-chat" | "sglang-generate" | "vllm-completions";
let engine: SimEngine;
const servers = new Map<Api, InProcessTree>();

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: sharedFolder(), reasoning: true });
  for (const api of ["sglang-chat", "sglang-generate", "vllm-completions"] as const)
    servers.set(api, await startTree({ engineUrl: engine.url, engineApi: api, workers: 1, logLevel: "warn" }));
});
test.after(async () => {
  for (const server of servers.values()) await server.shutdown();
  await engine?.close();
});

const WEATHER: Anthropic.Tool = {
  name: "get_weather",
  description: "Weather for a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
const SYSTEM = "You are helpful.";
const ASK: Anthropic.MessageParam = { role: "user", content: "What is the weather in Paris?" };

async function client(api: Api): Promise<{ anthropic: Anthropic; id: string; url: string }> {
  const url = servers.get(api)!.url;
  const id = await newSession(url);
  return { anthropic: new Anthropic({ baseURL: `${url}/sessions/${id}`, apiKey: "unused", maxRetries: 0 }), id, url };
}

const blocksOf = (m: Anthropic.Message): string[] => m.content.map((b) => b.type);

for (const api of ["sglang-chat", "sglang-generate"] as const)
  for (const streamed of [false, true]) {
    test(`${api}, ${streamed ? "streamed" : "not streamed"}: a tool loop whose second prompt extends the first exactly`, async () => {
      const { anthropic, id, url } = await client(api);
      const messages: Anthropic.MessageParam[] = [ASK];
      const ask = async () => {
        const params = { model: "m", max_tokens: 400, system: SYSTEM, messages, tools: [WEATHER] };
        if (!streamed) return anthropic.messages.create(params);
        const stream = anthropic.messages.stream(params);
        const kinds: string[] = [];
        for await (const event of stream) kinds.push(event.type);
        assert.is(kinds[0], "message_start");
        assert.equal(kinds.slice(-2), ["message_delta", "message_stop"]);
        assert.ok(kinds.includes("content_block_start") && kinds.includes("content_block_delta"));
        return stream.finalMessage();
      };
      const first = await ask();
      assert.is(first.type, "message");
      assert.is(first.role, "assistant");
      assert.is(first.stop_reason, "tool_use");
      assert.equal(
        blocksOf(first),
        ["thinking", "text", "tool_use"].filter((t) => blocksOf(first).includes(t)),
      );
      // The simulated engine reasons on its token-level routes only.
      if (api === "sglang-generate") assert.ok(blocksOf(first).includes("thinking"), "reasoning: a thinking block");
      const use = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === "tool_use")!;
      assert.is(use.name, "get_weather");
      assert.type(use.id, "string");
      assert.equal(Object.keys(use.input as object), ["city"]);
      messages.push(
        { role: "assistant", content: first.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: '{"temp_c": 21}' }] },
      );
      const second = await ask();
      assert.is(second.stop_reason, "end_turn");
      assert.ok(second.content.some((b) => b.type === "text" && b.text.length > 0));

      const [t0, t1] = await exactTrajectory(url, id, 2);
      assert.equal([first.usage.input_tokens, first.usage.output_tokens], [t0!.prompt.length, t0!.completion.length]);
      assert.equal([second.usage.input_tokens, second.usage.output_tokens], [t1!.prompt.length, t1!.completion.length]);

      // The history as the SDK keeps it goes on: a third turn extends the second exactly.
      messages.push({ role: "assistant", content: second.content }, { role: "user", content: "Thanks!" });
      await ask();
      await exactTrajectory(url, id, 3);
    });
  }

test("max_tokens is the engine's limit: stop_reason max_tokens", async () => {
  const { anthropic } = await client("sglang-generate");
  const reply = await anthropic.messages.create({ model: "m", max_tokens: 3, messages: [ASK] });
  assert.is(reply.stop_reason, "max_tokens");
  assert.is(reply.usage.output_tokens, 3);
});

for (const api of ["sglang-generate", "vllm-completions"] as const)
  test(`${api}: a stop sequence the engine matched is stop_reason stop_sequence, streamed and not`, async () => {
    const { anthropic } = await client(api);
    const params = { model: "m", max_tokens: 200, stop_sequences: ["plan"], messages: [ASK] };
    const whole = await anthropic.messages.create(params);
    assert.equal([whole.stop_reason, whole.stop_sequence], ["stop_sequence", "plan"]);
    const streamed = await anthropic.messages.stream(params).finalMessage();
    assert.equal([streamed.stop_reason, streamed.stop_sequence], ["stop_sequence", "plan"]);
    const other = await anthropic.messages.create({ ...params, stop_sequences: ["never said"] });
    assert.equal([other.stop_reason, other.stop_sequence], ["end_turn", null]);
  });

test("errors come in Anthropic's shape, and the SDK reads them", async () => {
  const { anthropic, url, id } = await client("sglang-chat");
  const bad = await call<{ type: string; error: { type: string; message: string } }>(
    url,
    "POST",
    `/sessions/${id}/v1/messages`,
    { model: "m", max_tokens: 10, messages: [] },
  );
  assert.is(bad.status, 400);
  assert.is(bad.json.type, "error");
  assert.is(bad.json.error.type, "invalid_request_error");
  assert.match(bad.json.error.message, /non-empty `messages`/);
  const garbled = await call<{ error: { type: string } }>(url, "POST", `/sessions/${id}/v1/messages`, "{nope");
  assert.equal([garbled.status, garbled.json.error.type], [400, "invalid_request_error"]);
  const gone = await call<{ error: { type: string; message: string } }>(
    url,
    "POST",
    "/sessions/feedfacefeedfacefeedfacefeedface/v1/messages",
    { model: "m", max_tokens: 10, messages: [ASK] },
  );
  assert.equal([gone.status, gone.json.error.type], [404, "not_found_error"]);
  assert.match(gone.json.error.message, /^session not found/);
  try {
    await anthropic.messages.create({
      model: "m",
      max_tokens: 10,
      messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url: "http://x/y.png" } }] }],
    });
    assert.unreachable("an image block is refused");
  } catch (err) {
    assert.instance(err, Anthropic.BadRequestError);
    assert.match((err as Error).message, /not image/);
  }
});

test("one session, one API: the other one is a clear 400", async () => {
  const url = servers.get("sglang-chat")!.url;
  const { anthropic, id } = await client("sglang-chat");
  await anthropic.messages.create({ model: "m", max_tokens: 50, messages: [ASK] });
  const openai = new OpenAI({ baseURL: `${url}/sessions/${id}/v1`, apiKey: "unused", maxRetries: 0 });
  try {
    await openai.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] });
    assert.unreachable("chat on a messages session");
  } catch (err) {
    assert.instance(err, OpenAI.BadRequestError);
    assert.match((err as Error).message, /speaks the messages API .*one session, one API/);
  }
  const other = await newSession(url);
  const chatted = new OpenAI({ baseURL: `${url}/sessions/${other}/v1`, apiKey: "unused", maxRetries: 0 });
  await chatted.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] });
  const onChat = new Anthropic({ baseURL: `${url}/sessions/${other}`, apiKey: "unused", maxRetries: 0 });
  try {
    await onChat.messages.create({ model: "m", max_tokens: 50, messages: [ASK] });
    assert.unreachable("messages on a chat session");
  } catch (err) {
    assert.instance(err, Anthropic.BadRequestError);
    assert.match((err as Error).message, /speaks the chat API/);
    assert.is(
      (err as InstanceType<typeof Anthropic.APIError>).errorCode,
      "TITO_ERR_CLIENT_API_MIX",
      "the SDK reads our code",
    );
  }
});

test.run();
