// The simulated engine writes in a TITO family's format: on the chat route the reply is the
// family's formatCompletion text + its first stop token, and the message is what the
// family's parser makes of it (a family with no call format answers in words); facts come
// from the request's messages for non-ChatML prompts; the token routes stop at the
// family's stop token; `titoFamily` / `--tito-family` choose the family.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../sessions/chat-template.ts";
import { SessionConfigError } from "../../sessions/errors.ts";
import { selectFamily } from "../../sessions/families/index.ts";
import { promptContext, renderOrThrow } from "../../sessions/prompt-builder.ts";
import type { TokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { buildSimEngineApp, type SimEngineOptions } from "../../server/sim-engine/sim-engine.ts";
import type { ChatCompletion } from "../helpers/bodies.ts";
import { npmFolder } from "../sessions/fixtures.ts";
import { TS_LOADER } from "../helpers/ts-loader.ts";

const llama = npmFolder("llama3_1");
const gemma = npmFolder("gemma3");
const EOT = llama.tokenId("<|eot_id|>")!;
const END_OF_TURN = gemma.tokenId("<end_of_turn>")!;
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } } },
  },
};
const tools = [weather];

async function post<Body = ChatCompletion>(options: SimEngineOptions, body: unknown, url = "/v1/chat/completions") {
  const app = buildSimEngineApp(options);
  try {
    const res = await app.inject({ method: "POST", url, payload: body as object });
    assert.is(res.statusCode, 200, res.body);
    return res.json() as Body;
  } finally {
    await app.close();
  }
}

const idsOf = (json: ChatCompletion) => json.choices[0]!.meta_info.output_token_logprobs.map(([, id]) => id);

/** The prompt ids the session server would send: the family's render with the generation prompt. */
function promptIds(folder: TokenizerFolder, messages: ChatMessage[], withTools = true): number[] {
  const family = selectFamily(folder);
  const ctx = promptContext(folder, family, { ...family.pinnedKwargs });
  return folder.encode(
    renderOrThrow(ctx.renderer, messages, {
      addGenerationPrompt: true,
      kwargs: ctx.kwargs,
      tools: withTools ? tools : undefined,
    }),
  );
}

test("llama3: a tool call in Llama 3.1's JSON, ended by <|eot_id|>, parsed into tool_calls", async () => {
  const messages = [{ role: "user", content: "Weather in Paris?" }];
  for (const body of [
    { messages, tools },
    { messages, tools, input_ids: promptIds(llama, messages) },
  ]) {
    const json = await post({ tokenizerFolder: llama }, body);
    const choice = json.choices[0]!;
    const ids = idsOf(json);
    assert.is(llama.decode(ids), '{"name": "get_weather", "parameters": {"city": "value", "days": 1}}<|eot_id|>');
    assert.is(choice.finish_reason, "tool_calls");
    assert.equal(choice.meta_info.finish_reason, { type: "stop", matched: EOT });
    assert.is(choice.message.content, "");
    assert.is(choice.message.tool_calls!.length, 1);
    assert.match(choice.message.tool_calls![0]!.id, /^call_[0-9a-f]{8}0$/);
    assert.is(choice.message.tool_calls![0]!.function.name, "get_weather");
    assert.equal(JSON.parse(choice.message.tool_calls![0]!.function.arguments), { city: "value", days: 1 });
  }
});

test("llama3 input_ids: turn count and the tool-result flag come from the request's messages", async () => {
  const messages: ChatMessage[] = [
    { role: "user", content: "Weather in Paris?" },
    {
      role: "assistant",
      content: "",
      tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: { city: "Paris" } } }],
    },
    { role: "tool", tool_call_id: "c1", content: "sunny" },
  ];
  const json = await post({ tokenizerFolder: llama }, { messages, tools, input_ids: promptIds(llama, messages) });
  const choice = json.choices[0]!;
  assert.match(choice.message.content, /^Turn 2: \S/);
  assert.not.ok("tool_calls" in choice.message);
  assert.is(choice.finish_reason, "stop");
  assert.is(llama.decode(idsOf(json)), `${choice.message.content}<|eot_id|>`);
});

test("gemma3: no call format, so tools get a sentence; it ends with <end_of_turn>", async () => {
  const messages = [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Weather in Paris?" },
  ];
  const json = await post({ tokenizerFolder: gemma }, { messages, tools, input_ids: promptIds(gemma, messages) });
  const choice = json.choices[0]!;
  assert.match(choice.message.content, /^Turn 1: \S/);
  assert.not.ok("tool_calls" in choice.message);
  assert.is(choice.finish_reason, "stop");
  assert.equal(choice.meta_info.finish_reason, { type: "stop", matched: END_OF_TURN });
  assert.is(gemma.decode(idsOf(json)), `${choice.message.content}<end_of_turn>`);
});

test("titoFamily chooses the format: llama3's folder as `default` writes no call", async () => {
  const messages = [{ role: "user", content: "Weather in Paris?" }];
  const json = await post({ tokenizerFolder: llama, titoFamily: "default" }, { messages, tools });
  assert.not.ok("tool_calls" in json.choices[0]!.message);
  assert.match(json.choices[0]!.message.content, /^Turn 1: /);
  assert.throws(
    () => buildSimEngineApp({ tokenizerFolder: llama, titoFamily: "qwen4" }),
    (e: unknown) => e instanceof SessionConfigError && /unknown tito family "qwen4"/.test(e.message),
  );
});

test("token routes stop at the family's stop token: /generate and /v1/completions on llama3 and gemma3", async () => {
  for (const [folder, stop] of [
    [llama, EOT],
    [gemma, END_OF_TURN],
  ] as const) {
    const input = promptIds(folder, [{ role: "user", content: "hi" }], false);
    const generated = await post<{ output_ids: number[]; meta_info: { finish_reason: unknown } }>(
      { tokenizerFolder: folder },
      { input_ids: input, sampling_params: { max_new_tokens: 200 } },
      "/generate",
    );
    assert.is(generated.output_ids.at(-1), stop);
    assert.equal(generated.meta_info.finish_reason, { type: "stop", matched: stop });
    const completed = await post<{ choices: Array<{ token_ids: number[]; finish_reason: string }> }>(
      { tokenizerFolder: folder },
      { prompt: input, max_tokens: 200, return_token_ids: true },
      "/v1/completions",
    );
    assert.is(completed.choices[0]!.token_ids.at(-1), stop);
    assert.is(completed.choices[0]!.finish_reason, "stop");
  }
});

test("engine-main: --tito-family is passed on (an unknown name fails the start)", async () => {
  const main = fileURLToPath(new URL("../../server/sim-engine/engine-main.ts", import.meta.url));
  const proc = spawn(process.execPath, [...TS_LOADER, main, "--port", "0", "--tito-family", "qwen4"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  proc.stderr!.on("data", (d) => (stderr += d));
  const [code] = await once(proc, "exit");
  assert.is(code, 1, stderr);
  assert.match(stderr, /sim-engine: cannot start: unknown tito family "qwen4"/);
});

test.run();
