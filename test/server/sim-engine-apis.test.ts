// The simulated engine's stock-engine routes over real sockets: SGLang's /generate and
// vLLM's /v1/completions. Reply shapes, ids that are the tokenizer's ids of the text plus
// the stop token, the same choice as the chat route, a multi-turn tool loop, stop and
// length rules in each engine's order, routed_experts, structured output, reasoning,
// each engine's error shape, and the fault hook.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { renderChat, type ChatMessage } from "../../sessions/chat-template.ts";
import { startSimEngine, type SimEngine, type SimRoute } from "../../server/sim-engine/sim-engine.ts";
import { payloadByte } from "../../server/sim-engine/sim-engine-payload.ts";
import type { ChatCompletion } from "../helpers/bodies.ts";
import type { CompletionsReply, GenerateReply } from "../helpers/engine-bodies.ts";
import { qwen3 } from "../sessions/fixtures.ts";

const qwen = qwen3();
const IM_END = qwen.tokenId("<|im_end|>")!;
const TOOL_CALL_END = qwen.tokenId("</tool_call>")!;
const NEWLINE = qwen.encode("\n")[0];

const weather = {
  type: "function",
  function: {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } } },
  },
};
const tools = [weather];
const CALL = `<tool_call>\n{"name": "get_weather", "arguments": {"city": "value", "days": 1}}\n</tool_call>`;

let engine: SimEngine;
let thinking: SimEngine;
let fault: ((body: unknown, route: SimRoute) => void | Promise<void>) | undefined;

test.before(async () => {
  engine = await startSimEngine({
    tokenizerFolder: qwen,
    routedExpertsBytes: 1001,
    beforeReply: (body, route) => fault?.(body, route),
  });
  thinking = await startSimEngine({ tokenizerFolder: qwen, reasoning: true });
});

test.after(async () => {
  await Promise.all([engine?.close(), thinking?.close()]);
});

async function post<Body>(
  path: string,
  body: unknown,
  e = engine,
): Promise<{ status: number; text: string; json: Body }> {
  const res = await fetch(e.url + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, json: JSON.parse(text) as Body };
}

async function generate(body: Record<string, unknown>, e = engine): Promise<GenerateReply> {
  const res = await post<GenerateReply>("/generate", { return_logprob: true, ...body }, e);
  assert.is(res.status, 200, res.text);
  return res.json;
}

async function complete(body: Record<string, unknown>, e = engine): Promise<CompletionsReply["choices"][0]> {
  const res = await post<CompletionsReply>("/v1/completions", { max_tokens: 200, return_token_ids: true, ...body }, e);
  assert.is(res.status, 200, res.text);
  return res.json.choices[0];
}

const prompt = (messages: ChatMessage[], withTools = true, kwargs?: Record<string, unknown>) =>
  qwen.encode(renderChat(qwen, messages, { tools: withTools ? tools : undefined, addGenerationPrompt: true, kwargs }));
const user = (content: string): ChatMessage[] => [{ role: "user", content }];

test("/generate: SGLang's reply shape; ids are the text's ids plus <|im_end|>, which the text leaves out", async () => {
  const ids = prompt(user("hello there"), false);
  for (const skip of [true, false]) {
    const json = await generate({
      input_ids: ids,
      sampling_params: { max_new_tokens: 100, skip_special_tokens: !skip },
    });
    assert.equal(Object.keys(json), ["text", "output_ids", "meta_info"]);
    assert.match(json.text, /^Turn 1: \S.*\.$/);
    assert.equal(json.output_ids, [...qwen.encode(json.text), IM_END]);
    const meta = json.meta_info;
    assert.equal(meta.finish_reason, { type: "stop", matched: IM_END });
    assert.is(meta.prompt_tokens, ids.length);
    assert.is(meta.completion_tokens, json.output_ids.length);
    assert.is(meta.cached_tokens, 0);
    assert.equal(meta.input_token_logprobs, []);
    assert.equal(
      meta.output_token_logprobs!.map((e) => e[1]),
      json.output_ids,
    );
    for (const [lp, , text] of meta.output_token_logprobs!) assert.ok(lp < 0 && text === null);
    assert.not.ok("routed_experts" in meta);
  }
  const bare = await post<GenerateReply>("/generate", { input_ids: ids, rid: "my-rid" });
  assert.not.ok("output_token_logprobs" in bare.json.meta_info, "no logprobs unless return_logprob");
  assert.is(bare.json.meta_info.id, "my-rid");
  const top = await generate({ input_ids: ids, top_logprobs_num: 3 });
  assert.ok(top.meta_info.output_top_logprobs!.every((row, i) => row.length === 3 && row[0][1] === top.output_ids[i]));
});

test("/v1/completions: vLLM's reply shape; token_ids hold <|im_end|>, the text does not, stop_reason null", async () => {
  const ids = prompt(user("hello there"), false);
  const res = await post<CompletionsReply>("/v1/completions", {
    model: "tito-sim",
    prompt: ids,
    max_tokens: 100,
    logprobs: 0,
    return_token_ids: true,
    skip_special_tokens: false,
  });
  assert.is(res.status, 200, res.text);
  const json = res.json;
  assert.match(json.id, /^cmpl-/);
  assert.is(json.object, "text_completion");
  assert.is(json.model, "tito-sim");
  const choice = json.choices[0];
  assert.match(choice.text, /^Turn 1: /);
  assert.equal(choice.token_ids, [...qwen.encode(choice.text), IM_END]);
  assert.equal(choice.prompt_token_ids, ids);
  assert.is(choice.finish_reason, "stop");
  assert.is(choice.stop_reason, null);
  assert.equal(json.usage, {
    prompt_tokens: ids.length,
    completion_tokens: choice.token_ids!.length,
    total_tokens: ids.length + choice.token_ids!.length,
    prompt_tokens_details: null,
  });
  const lp = choice.logprobs!;
  assert.equal(
    lp.tokens,
    choice.token_ids!.map((id) => qwen.decode([id])),
  );
  assert.is(lp.tokens.at(-1), "<|im_end|>");
  assert.is(lp.text_offset[1], lp.tokens[0].length);
  assert.ok(
    lp.top_logprobs.every((step, i) => Object.keys(step).length === 1 && step[lp.tokens[i]] === lp.token_logprobs[i]),
  );
  const asIds = await complete({ prompt: ids, logprobs: 3, return_tokens_as_token_ids: true });
  assert.equal(
    asIds.logprobs!.tokens,
    asIds.token_ids!.map((id) => `token_id:${id}`),
  );
  assert.ok(asIds.logprobs!.top_logprobs.every((step) => Object.keys(step).length === 3));
  const plain = await complete({ prompt: ids, return_token_ids: false });
  assert.is(plain.token_ids, null);
  assert.is(plain.prompt_token_ids, null);
  assert.is(plain.logprobs, null);
});

test("the same prompt ids get the same completion ids on all three routes", async () => {
  const conversations: ChatMessage[][] = [
    user("weather in Paris?"),
    [{ role: "system", content: "be brief" }, ...user("weather?")],
    [
      ...user("weather?"),
      {
        role: "assistant",
        content: "",
        tool_calls: [{ type: "function", function: { name: "get_weather", arguments: { city: "Oslo" } } }],
      },
      { role: "tool", content: "rain" },
    ],
  ];
  for (const messages of conversations) {
    for (const withTools of [true, false]) {
      const ids = prompt(messages, withTools);
      const chat = await post<ChatCompletion>("/v1/chat/completions", {
        input_ids: ids,
        tools: withTools ? tools : undefined,
      });
      const chatIds = chat.json.choices[0].meta_info.output_token_logprobs.map((p: number[]) => p[1]);
      assert.equal((await generate({ input_ids: ids })).output_ids, chatIds);
      assert.equal((await complete({ prompt: ids })).token_ids, chatIds);
    }
  }
});

test("a multi-turn tool loop: a Qwen tool call, then an answer to the tool result, on both token APIs", async () => {
  const toolTurn = qwen.encode(
    "<|im_start|>user\n<tool_response>\nrain\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
  );
  const userTurn = qwen.encode("<|im_start|>user\nand tomorrow?<|im_end|>\n<|im_start|>assistant\n");
  const apis: Array<(ids: number[]) => Promise<{ text: string; ids: number[] }>> = [
    async (ids) => {
      const r = await generate({ input_ids: ids });
      return { text: r.text, ids: r.output_ids };
    },
    async (ids) => {
      const r = await complete({ prompt: ids });
      return { text: r.text, ids: r.token_ids! };
    },
  ];
  for (const api of apis) {
    const ids1 = prompt(user("weather?"));
    const turn1 = await api(ids1);
    assert.is(turn1.text, CALL);
    assert.equal(turn1.ids, [...qwen.encode(CALL), IM_END]);
    const history = [...ids1, ...turn1.ids, NEWLINE];
    const turn2 = await api([...history, ...toolTurn]);
    assert.match(turn2.text, /^Turn 2: /);
    assert.is(turn2.ids.at(-1), IM_END);
    const history2 = [...history, ...toolTurn, ...turn2.ids, NEWLINE];
    assert.is((await api([...history2, ...userTurn])).text, CALL, "a new user turn calls the tool again");
  }
});

test("deterministic: the same request gives the same bytes but for id and created", async () => {
  const ids = prompt(user("same question"));
  const a = await post<GenerateReply>("/generate", { input_ids: ids, return_logprob: true });
  const b = await post<GenerateReply>("/generate", { input_ids: ids, return_logprob: true });
  assert.is.not(a.json.meta_info.id, b.json.meta_info.id);
  assert.is(a.text.replace(a.json.meta_info.id, "ID"), b.text.replace(b.json.meta_info.id, "ID"));
  const c = await post<CompletionsReply>("/v1/completions", { prompt: ids, logprobs: 1 });
  const d = await post<CompletionsReply>("/v1/completions", { prompt: ids, logprobs: 1 });
  const strip = (r: typeof c) => r.text.replace(r.json.id, "ID").replace(/"created":\d+/, "");
  assert.is(strip(c), strip(d));
  const other = await generate({ input_ids: prompt(user("another question"), false) });
  const texts = new Set([other.text]);
  for (let i = 0; i < 6; i++) texts.add((await generate({ input_ids: prompt(user(`q ${i}`), false) })).text);
  assert.ok(texts.size > 1, "different prompts, different replies");
});

test("length: SGLang checks max_new_tokens first, vLLM the stop token first; vLLM defaults to 16, null is no limit", async () => {
  const ids = prompt(user("weather?"));
  const full = [...qwen.encode(CALL), IM_END];
  const cut = await generate({ input_ids: ids, sampling_params: { max_new_tokens: 3 } });
  assert.equal(cut.output_ids, full.slice(0, 3));
  assert.equal(cut.meta_info.finish_reason, { type: "length", length: 3 });
  assert.is(cut.text, qwen.decode(full.slice(0, 3)));
  // The stop token on the last allowed position: `length` in SGLang, nothing trimmed.
  const edge = await generate({
    input_ids: ids,
    sampling_params: { max_new_tokens: full.length, skip_special_tokens: false },
  });
  assert.equal(edge.output_ids, full);
  assert.equal(edge.meta_info.finish_reason, { type: "length", length: full.length });
  assert.is(edge.text, `${CALL}<|im_end|>`);
  const skipped = await generate({ input_ids: ids, sampling_params: { max_new_tokens: full.length } });
  assert.is(skipped.text, CALL, "skip_special_tokens (the default) drops <|im_end|> from the text");
  const vllmEdge = await complete({ prompt: ids, max_tokens: full.length });
  assert.is(vllmEdge.finish_reason, "stop");
  assert.equal(vllmEdge.token_ids, full);
  const vllmCut = await complete({ prompt: ids, max_tokens: 5 });
  assert.is(vllmCut.finish_reason, "length");
  assert.is(vllmCut.stop_reason, null);
  assert.equal(vllmCut.token_ids, full.slice(0, 5));
  assert.is(vllmCut.text, qwen.decode(full.slice(0, 5)));
  const byDefault = await complete({ prompt: ids, max_tokens: undefined });
  assert.is(byDefault.token_ids!.length, 16);
  assert.is(byDefault.finish_reason, "length");
  // null: released vLLM generates, then fails building the reply (vLLM issue #19862)
  const unbounded = await post("/v1/completions", { prompt: ids, max_tokens: null });
  assert.is(unbounded.status, 500, unbounded.text);
});

test("stop strings and stop token ids: ids keep the stopping token, the text stops before it", async () => {
  const ids = prompt(user("weather?"));
  const full = [...qwen.encode(CALL), IM_END];
  const upTo = full.indexOf(TOOL_CALL_END) + 1;
  const byToken = await generate({ input_ids: ids, sampling_params: { stop_token_ids: [TOOL_CALL_END] } });
  assert.equal(byToken.output_ids, full.slice(0, upTo));
  assert.equal(byToken.meta_info.finish_reason, { type: "stop", matched: TOOL_CALL_END });
  assert.is(byToken.text, CALL.slice(0, -"</tool_call>".length));
  const byString = await generate({ input_ids: ids, sampling_params: { stop: ["</tool_call>"] } });
  assert.equal(byString.output_ids, full.slice(0, upTo));
  assert.equal(byString.meta_info.finish_reason, { type: "stop", matched: "</tool_call>" });
  assert.is(byString.text, CALL.slice(0, -"</tool_call>".length));
  const kept = await generate({ input_ids: ids, sampling_params: { stop: "</tool_call>", no_stop_trim: true } });
  assert.is(kept.text, CALL);
  const vToken = await complete({ prompt: ids, stop_token_ids: [TOOL_CALL_END] });
  assert.is(vToken.stop_reason, TOOL_CALL_END);
  assert.is(vToken.finish_reason, "stop");
  assert.equal(vToken.token_ids, full.slice(0, upTo));
  const vString = await complete({ prompt: ids, stop: "\n</tool" });
  assert.is(vString.stop_reason, "\n</tool");
  assert.is(vString.text, CALL.slice(0, CALL.indexOf("\n</tool")));
  const vKept = await complete({ prompt: ids, stop: ["}}"], include_stop_str_in_output: true });
  assert.is(vKept.text, CALL.slice(0, CALL.indexOf("}}") + 2));
});

test("/generate routed_experts: the configured synthetic payload when asked or configured", async () => {
  const ids = prompt(user("hello"), false);
  const off = await generate({ input_ids: ids });
  assert.not.ok("routed_experts" in off.meta_info);
  const on = await generate({ input_ids: ids, return_routed_experts: true });
  const bytes = Buffer.from(on.meta_info.routed_experts!, "base64");
  assert.is(bytes.length, 1001);
  assert.ok(bytes.every((b, i) => b === payloadByte(i)));
  assert.equal(on.output_ids, off.output_ids);
});

test("structured output: SGLang json_schema, vLLM structured_outputs.json and response_format", async () => {
  const schema = { type: "object", properties: { answer: { type: "string" }, score: { type: "number" } } };
  const ids = prompt(user("rate it"));
  const sglang = await generate({ input_ids: ids, sampling_params: { json_schema: JSON.stringify(schema) } });
  assert.equal(JSON.parse(sglang.text), { answer: "value", score: 1 });
  assert.equal(sglang.output_ids, [...qwen.encode(sglang.text), IM_END]);
  const vllm = await complete({ prompt: ids, structured_outputs: { json: schema } });
  assert.equal(JSON.parse(vllm.text), { answer: "value", score: 1 });
  const format = await complete({
    prompt: ids,
    response_format: { type: "json_schema", json_schema: { name: "x", schema } },
  });
  assert.is(format.text, vllm.text);
  // `{}` is how the adapters ask for any JSON object (response_format json_object).
  assert.is((await generate({ input_ids: ids, sampling_params: { json_schema: "{}" } })).text, "{}");
  assert.is((await complete({ prompt: ids, structured_outputs: { json: {} } })).text, "{}");
  const bad = await post<{ error: { message: string } }>("/generate", {
    input_ids: ids,
    sampling_params: { json_schema: "{" },
  });
  assert.is(bad.status, 400);
  assert.match(bad.json.error.message, /json_schema/);
});

test("reasoning (opt-in): a <think> block first, unless the prompt closed one", async () => {
  const ids = prompt(user("weather?"));
  const json = await generate({ input_ids: ids }, thinking);
  assert.match(json.text, /^<think>\n[^<]+\n<\/think>\n\n<tool_call>\n/);
  assert.ok(json.text.endsWith(CALL));
  assert.equal(json.output_ids, [...qwen.encode(json.text), IM_END]);
  const off = prompt(user("weather?"), true, { enable_thinking: false });
  assert.is((await complete({ prompt: off }, thinking)).text, CALL);
  assert.is((await generate({ input_ids: ids })).text, CALL, "off by default, like the chat route");
});

test("errors in each engine's shape; the fault hook sees the route and can fail a request", async () => {
  const g = await post<{ error: { message: string } }>("/generate", { input_ids: [[1, 2]] });
  assert.is(g.status, 400);
  assert.match(g.json.error.message, /batch/);
  for (const body of [{ input_ids: [1], sampling_params: { n: 2 } }, {}, { input_ids: [] }]) {
    const r = await post<{ error: { message: string } }>("/generate", body);
    assert.is(r.status, 400, JSON.stringify(body));
    assert.type(r.json.error.message, "string");
  }
  const v = await post<{ error: Record<string, unknown> }>("/v1/completions", { prompt: [1], n: 2 });
  assert.is(v.status, 400);
  assert.equal(Object.keys(v.json.error), ["message", "type", "param", "code"]);
  assert.is(v.json.error.code, 400);
  for (const body of [{ prompt: [1], echo: true }, { prompt: [[1], [2]] }, { prompt: [1], stop: [3] }]) {
    assert.is((await post("/v1/completions", body)).status, 400, JSON.stringify(body));
  }
  for (const path of ["/generate", "/v1/completions"]) {
    const init = { method: "POST", headers: { "content-type": "application/json" }, body: "{bad" };
    const res = await fetch(engine.url + path, init);
    assert.is(res.status, 400);
    assert.type(((await res.json()) as { error: { message: string } }).error.message, "string");
  }
  const seen: SimRoute[] = [];
  fault = (_body, route) => {
    seen.push(route);
    throw new Error("engine exploded");
  };
  try {
    const a = await post<{ error: { message: string } }>("/generate", { input_ids: [1] });
    assert.is(a.status, 500);
    assert.is(a.json.error.message, "engine exploded");
    const b = await post<{ error: { type: string } }>("/v1/completions", { prompt: [1] });
    assert.is(b.status, 500);
    assert.is(b.json.error.type, "InternalServerError");
  } finally {
    fault = undefined;
  }
  assert.equal(seen, ["/generate", "/v1/completions"]);
});

test.run();
