// The simulated engine's streamed replies (`stream: true`) in each engine's wire format,
// over real sockets: SGLang's /generate chunks (cumulative by default: each holds all so far
// and the last is the stream: false reply; incremental: the new part only), vLLM's
// /v1/completions delta chunks with a usage chunk on request, the chat route's chunks, all
// ending `data: [DONE]`; text that never ends inside a character; and the chunk hook's
// order and failure.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { renderChat } from "../../sessions/chat-template.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { qwen3 } from "../sessions/fixtures.ts";

const qwen = qwen3();
const GLYPH = "𓀀";
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string", enum: [GLYPH] } } },
    },
  },
];
const ids = qwen.encode(
  renderChat(qwen, [{ role: "user", content: "weather?" }], { tools, addGenerationPrompt: true }),
);
let engine: SimEngine;
let incremental: SimEngine;
let failAt = -1;
const seen: number[] = [];

test.before(async () => {
  const onStreamChunk = (_route: unknown, index: number) => {
    seen.push(index);
    if (index === failAt) throw new Error("the GPU fell over");
  };
  engine = await startSimEngine({ tokenizerFolder: qwen, reasoning: true, onStreamChunk, routedExpertsBytes: 300 });
  incremental = await startSimEngine({ tokenizerFolder: qwen, reasoning: true, incrementalStreaming: true });
});
test.after(async () => {
  await Promise.all([engine?.close(), incremental?.close()]);
});

async function events(e: SimEngine, path: string, body: Record<string, unknown>): Promise<unknown[]> {
  const res = await fetch(e.url + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  assert.is(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
  const text = await res.text();
  assert.ok(text.endsWith("data: [DONE]\n\n"));
  assert.not.ok(text.includes("\uFFFD"), "no chunk ends inside a character");
  return text
    .slice(0, -"data: [DONE]\n\n".length)
    .split("\n\n")
    .filter(Boolean)
    .map((e) => JSON.parse(e.replace(/^data: /, "")));
}

interface GenerateChunk {
  text: string;
  output_ids: number[];
  meta_info: {
    completion_tokens: number;
    finish_reason: unknown;
    output_token_logprobs: unknown[];
    routed_experts?: string;
  };
}

const generate = {
  input_ids: ids,
  sampling_params: { max_new_tokens: null, skip_special_tokens: false },
  return_logprob: true,
};

test("/generate: cumulative chunks, one per token; the last is the stream: false reply", async () => {
  const whole = await (
    await fetch(`${engine.url}/generate`, {
      method: "POST",
      body: JSON.stringify({ ...generate, return_routed_experts: true }),
      headers: { "content-type": "application/json" },
    })
  ).json();
  const chunks = (await events(engine, "/generate", {
    ...generate,
    return_routed_experts: true,
    stream: true,
  })) as GenerateChunk[];
  assert.is(chunks.length, whole.output_ids.length);
  chunks.forEach((c, i) => {
    assert.is(c.meta_info.completion_tokens, i + 1);
    assert.equal(c.output_ids, whole.output_ids.slice(0, i + 1));
    assert.is(c.meta_info.output_token_logprobs.length, i + 1);
    assert.ok(whole.text.startsWith(c.text) || i === chunks.length - 1);
    assert.is(c.meta_info.finish_reason === null, i < chunks.length - 1);
    assert.is(
      "routed_experts" in c.meta_info,
      i === chunks.length - 1,
      "the routing payload comes with the last chunk",
    );
  });
  const last = chunks.at(-1)!;
  assert.equal(
    { ...last, meta_info: { ...last.meta_info, id: 0 } },
    { ...whole, meta_info: { ...whole.meta_info, id: 0 } },
  );
  assert.ok(whole.text.includes(GLYPH));
  const glyphAt = chunks.findIndex((c) => c.text.includes(GLYPH));
  assert.is(chunks[glyphAt - 1]!.text, chunks[glyphAt - 2]!.text, "a token inside the character added no text");
});

test("/generate, incremental: each chunk holds only what is new; together they are the reply", async () => {
  const chunks = (await events(incremental, "/generate", { ...generate, stream: true })) as GenerateChunk[];
  const whole = await (
    await fetch(`${incremental.url}/generate`, {
      method: "POST",
      body: JSON.stringify(generate),
      headers: { "content-type": "application/json" },
    })
  ).json();
  assert.is(chunks.map((c) => c.text).join(""), whole.text);
  assert.equal(
    chunks.flatMap((c) => c.output_ids),
    whole.output_ids,
  );
  assert.equal(
    chunks.flatMap((c) => c.meta_info.output_token_logprobs),
    whole.meta_info.output_token_logprobs,
  );
  chunks.forEach((c, i) => assert.is(c.meta_info.completion_tokens, i + 1));
});

test("/v1/completions: delta chunks with token ids, prompt ids first, the finish last, then the usage chunk", async () => {
  const body = {
    prompt: ids,
    max_tokens: 200,
    logprobs: 0,
    return_token_ids: true,
    return_tokens_as_token_ids: true,
    skip_special_tokens: false,
  };
  const whole = await (
    await fetch(`${engine.url}/v1/completions`, {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "content-type": "application/json" },
    })
  ).json();
  const chunks = (await events(engine, "/v1/completions", {
    ...body,
    stream: true,
    stream_options: { include_usage: true },
  })) as Array<{
    object: string;
    choices: Array<{
      text: string;
      token_ids: number[];
      prompt_token_ids: number[] | null;
      finish_reason: string | null;
      logprobs: { tokens: string[] };
    }>;
    usage?: Record<string, number>;
  }>;
  const usage = chunks.pop()!;
  assert.equal(usage.choices, []);
  assert.equal(usage.usage, {
    prompt_tokens: ids.length,
    total_tokens: whole.usage.total_tokens,
    completion_tokens: whole.usage.completion_tokens,
  });
  for (const c of chunks) assert.is(c.object, "text_completion");
  const choices = chunks.map((c) => c.choices[0]!);
  assert.is(choices.map((c) => c.text).join(""), whole.choices[0].text);
  assert.equal(
    choices.flatMap((c) => c.token_ids),
    whole.choices[0].token_ids,
  );
  assert.equal(
    choices.flatMap((c) => c.logprobs.tokens),
    whole.choices[0].logprobs.tokens,
  );
  assert.equal(choices[0]!.prompt_token_ids, ids);
  assert.ok(choices.slice(1).every((c) => c.prompt_token_ids === null));
  assert.equal(choices.map((c) => c.finish_reason).filter(Boolean), ["stop"]);
  assert.is(choices.at(-1)!.finish_reason, "stop");
});

test("the chat route: role, content deltas, the tool call, the finish; a failing chunk is an error event", async () => {
  const chunks = (await events(engine, "/v1/chat/completions", { input_ids: ids, tools, stream: true })) as Array<{
    choices: Array<{ delta: Record<string, unknown>; finish_reason: string | null }>;
  }>;
  assert.equal(chunks[0]!.choices[0]!.delta, { role: "assistant", content: "" });
  assert.is(chunks.at(-1)!.choices[0]!.finish_reason, "tool_calls");
  assert.ok(chunks.some((c) => Array.isArray(c.choices[0]!.delta.tool_calls)));
  seen.length = 0;
  failAt = 3;
  const failed = await events(engine, "/generate", { ...generate, stream: true });
  failAt = -1;
  assert.equal(seen, [0, 1, 2, 3], "the hook runs before each chunk, in order");
  assert.is(failed.length, 4);
  assert.equal(failed.at(-1), { error: { message: "the GPU fell over" } });
});

test.run();
