// The simulated engine's pre-built mode on the stock-engine routes (and the prompt count it
// now reports on the chat route), and the byte scans that key it without parsing a body.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { renderChat, type ChatMessage } from "../../sessions/chat-template.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { payloadByte } from "../../server/sim-engine/sim-engine-payload.ts";
import { flagSet, scanIdArray } from "../../bench/sim-engine-prebuilt-scan.ts";
import { prebuiltReplies } from "../../bench/sim-engine-prebuilt.ts";
import type { ChatCompletion } from "../helpers/bodies.ts";
import type { CompletionsReply, GenerateReply } from "../helpers/engine-bodies.ts";
import { qwen3 } from "../sessions/fixtures.ts";

const qwen = qwen3();
const IM_END = qwen.tokenId("<|im_end|>")!;
const HEADER = qwen.encode("<|im_start|>assistant") as [number, number];

let prebuilt: SimEngine;

test.before(async () => {
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
  await prebuilt?.close();
});

async function post<Body>(path: string, body: unknown): Promise<{ status: number; text: string; json: Body }> {
  const res = await fetch(prebuilt.url + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, json: (text.startsWith("{") ? JSON.parse(text) : undefined) as Body };
}

/** The prompt ids of turn k: k earlier assistant turns, then the generation prompt. */
function turnIds(k: number): number[] {
  const messages: ChatMessage[] = [{ role: "user", content: "q" }];
  for (let i = 0; i < k; i++) messages.push({ role: "assistant", content: "a" }, { role: "user", content: "q" });
  return qwen.encode(renderChat(qwen, messages, { addGenerationPrompt: true }));
}

const routedSize = (r3: string | undefined) => (r3 === undefined ? 0 : Buffer.from(r3, "base64").length);

test("pre-built /generate: N ids ending in <|im_end|>, the prompt counted, routed_experts keyed by the turn", async () => {
  for (const [k, size] of [
    [0, 0],
    [2, 2001],
    [3, 3001],
  ]) {
    const ids = turnIds(k);
    const res = await post<GenerateReply>("/generate", { input_ids: ids, return_logprob: true });
    assert.is(res.status, 200);
    const json = res.json;
    assert.equal(Object.keys(json), ["text", "output_ids", "meta_info"]);
    assert.is(json.output_ids.length, 7);
    assert.is(json.output_ids[6], IM_END);
    assert.is(json.text, qwen.decode(json.output_ids.slice(0, 6)));
    assert.equal(
      json.meta_info.output_token_logprobs!.map((e) => e[1]),
      json.output_ids,
    );
    assert.equal(json.meta_info.finish_reason, { type: "stop", matched: IM_END });
    assert.is(json.meta_info.prompt_tokens, ids.length);
    assert.is(routedSize(json.meta_info.routed_experts), size, `turn ${k}`);
    if (size > 0) assert.is(Buffer.from(json.meta_info.routed_experts!, "base64")[size - 1], payloadByte(size - 1));
    assert.is((await post("/generate", { input_ids: ids, return_logprob: true })).text, res.text, "the same bytes");
  }
});

test("pre-built /v1/completions: token_ids, the prompt's bytes echoed, token_id:N when asked, no routing", async () => {
  const ids = turnIds(2);
  const body = { model: "m", prompt: ids, max_tokens: 100, logprobs: 0, return_token_ids: true };
  const res = await post<CompletionsReply>("/v1/completions", body);
  assert.is(res.status, 200);
  const choice = res.json.choices[0];
  assert.is(res.json.object, "text_completion");
  assert.is(choice.token_ids!.length, 7);
  assert.is(choice.token_ids![6], IM_END);
  assert.is(choice.text, qwen.decode(choice.token_ids!.slice(0, 6)));
  assert.equal(choice.prompt_token_ids, ids);
  assert.is(choice.finish_reason, "stop");
  assert.is(choice.stop_reason, null);
  assert.equal(res.json.usage, {
    prompt_tokens: ids.length,
    total_tokens: ids.length + 7,
    completion_tokens: 7,
    prompt_tokens_details: null,
  });
  assert.equal(
    choice.logprobs!.tokens,
    choice.token_ids!.map((id) => qwen.decode([id])),
  );
  assert.not.ok(res.text.includes("routed_experts"));
  const asIds = await post<CompletionsReply>("/v1/completions", { ...body, return_tokens_as_token_ids: true });
  assert.equal(
    asIds.json.choices[0].logprobs!.tokens,
    choice.token_ids!.map((id) => `token_id:${id}`),
  );
  // Spacing is kept as sent: the reply carries the prompt array's own bytes.
  const spaced = `{"prompt": [ ${ids.join(" , ")} ], "return_token_ids": true}`;
  assert.equal((await post<CompletionsReply>("/v1/completions", spaced)).json.choices[0].prompt_token_ids, ids);
  const none = await post<CompletionsReply>("/v1/completions", "not even json");
  assert.is(none.status, 200, "the pre-built mode never parses");
  assert.equal(none.json.choices[0].prompt_token_ids, []);
  assert.is(none.json.usage.prompt_tokens, 0);
});

test("pre-built chat: prompt_tokens is the number of input_ids sent", async () => {
  const ids = turnIds(1);
  const body = { messages: [{ role: "user", content: "q" }], input_ids: ids };
  const json = (await post<ChatCompletion>("/v1/chat/completions", body)).json;
  assert.is(json.choices[0].meta_info.prompt_tokens, ids.length);
  assert.equal(json.usage, { prompt_tokens: ids.length, completion_tokens: 7, total_tokens: ids.length + 7 });
  const noIds = (await post<ChatCompletion>("/v1/chat/completions", { messages: body.messages })).json;
  assert.is(noIds.choices[0].meta_info.prompt_tokens, 0);
});

test("scanIdArray: the last int array under the key, its count and assistant headers; flagSet", () => {
  const [s, a] = HEADER;
  const scan = (json: string, key = "input_ids") => scanIdArray(Buffer.from(json), key, HEADER);
  const found = scan(`{"input_ids" : [ ${s}, ${a},1 ,${s},${a}, 7 ]}`)!;
  assert.is(found.count, 6);
  assert.is(found.headers, 2);
  assert.is(found.bytes.toString(), `[ ${s}, ${a},1 ,${s},${a}, 7 ]`);
  // A key inside a string, a key whose value is not an int array: skipped for an earlier real one.
  assert.is(scan(`{"input_ids":[1,2],"content":"\\"input_ids\\": [9]","x":{"input_ids":{"a":[3]}}}`)!.count, 2);
  assert.is(scan(`{"input_ids":[1,2],"tools":[{"input_ids":["a"]}]}`)!.count, 2);
  assert.is(scan(`{"content":"input_ids"}`), undefined);
  assert.is(scan(`{"input_ids":[]}`)!.count, 0);
  assert.is(scan(`{"prompt":[5,6,7]}`, "prompt")!.count, 3);
  assert.is(scanIdArray(Buffer.from(`[${s},${a}]`), "x"), undefined);
  assert.ok(flagSet(Buffer.from(`{"return_tokens_as_token_ids" : true}`), "return_tokens_as_token_ids"));
  assert.not.ok(flagSet(Buffer.from(`{"return_tokens_as_token_ids":false}`), "return_tokens_as_token_ids"));
  assert.not.ok(flagSet(Buffer.from(`{}`), "return_tokens_as_token_ids"));
});

test.run();
