// The simulated engine's prefix cache (server/sim-engine/sim-engine-cache.ts) on its three
// routes: a prompt hits what an earlier request with the same salt left cached (whole blocks
// of 16, never the prompt's last token), misses under another salt; SGLang reports it as
// meta_info.cached_tokens, vLLM as usage.prompt_tokens_details.cached_tokens; the salt fields
// are checked as upstream checks them; without the option the replies are as before.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { buildSimEngineApp, type SimEngineOptions } from "../../server/sim-engine/sim-engine.ts";
import { renderChat } from "../../sessions/chat-template.ts";
import { qwen3 } from "../sessions/fixtures.ts";

const qwen = qwen3();
const opening = qwen.encode(
  renderChat(qwen, [{ role: "user", content: "Tell me about the weather in Paris, Lyon and Marseille this week." }], {
    addGenerationPrompt: true,
  }),
);
/** The opening turn, its reply and a follow-up: what the next turn of the conversation sends. */
const followUp = (completion: number[]) => [...opening, ...completion, ...qwen.encode("\nAnd tomorrow?")];

interface Meta {
  cached_tokens?: number;
  weight_version?: string;
  output_token_logprobs: number[][];
}
/** The members of the three routes' replies (and error bodies) the tests read. */
interface Reply {
  meta_info: Meta;
  output_ids: number[];
  choices: Array<{ meta_info: Meta; token_ids: number[] }>;
  usage: { prompt_tokens_details: { cached_tokens: number } | null };
  error: { message: string };
}

function engine(options: SimEngineOptions = {}) {
  const app = buildSimEngineApp({ tokenizerFolder: qwen, prefixCache: true, ...options });
  return async (url: string, body: Record<string, unknown>) => {
    const res = await app.inject({ method: "POST", url, payload: body });
    return { status: res.statusCode, json: res.json() as Reply };
  };
}

test("/generate: the next turn hits under its salt, misses under another; SGLang's meta_info.cached_tokens", async () => {
  const post = engine();
  const first = await post("/generate", {
    input_ids: opening,
    extra_key: "v1",
    sampling_params: { max_new_tokens: 8 },
  });
  assert.is(first.status, 200);
  assert.is(first.json.meta_info.cached_tokens, 0);
  const next = followUp(first.json.output_ids);
  const hit = await post("/generate", { input_ids: next, extra_key: "v1", sampling_params: { max_new_tokens: 8 } });
  const cached = hit.json.meta_info.cached_tokens as number;
  assert.ok(cached > 0 && cached % 16 === 0, `whole blocks: ${cached}`);
  assert.ok(cached <= opening.length + first.json.output_ids.length && cached < next.length);
  for (const other of [{ extra_key: "v2" }, { cache_salt: "v1" }, {}]) {
    const miss = await post("/generate", { input_ids: next, ...other, sampling_params: { max_new_tokens: 8 } });
    assert.is(miss.json.meta_info.cached_tokens, 0, JSON.stringify(other));
  }
  // "" is no salt (SGLang turns it into None): it shares the unsalted request's cache.
  const empty = await post("/generate", { input_ids: next, extra_key: "", sampling_params: { max_new_tokens: 8 } });
  assert.ok(empty.json.meta_info.cached_tokens! > 0);
});

test("the chat route: choices[0].meta_info.cached_tokens under cache_salt; weight_version when set", async () => {
  const post = engine({ weightVersion: "step-7" });
  const body = (ids: number[]) => ({ messages: [{ role: "user", content: "x" }], input_ids: ids, cache_salt: "s" });
  const first = await post("/v1/chat/completions", body(opening));
  assert.is(first.status, 200);
  const meta = first.json.choices[0]!.meta_info;
  assert.is(meta.cached_tokens, 0);
  assert.is(meta.weight_version, "step-7");
  const ids = meta.output_token_logprobs.map((e) => e[1]!);
  const again = await post("/v1/chat/completions", body(followUp(ids)));
  assert.ok(again.json.choices[0]!.meta_info.cached_tokens! > 0);
});

test("/v1/completions: usage.prompt_tokens_details.cached_tokens with promptTokensDetails, null without", async () => {
  for (const details of [true, false]) {
    const post = engine({ promptTokensDetails: details });
    const body = (prompt: number[]) => ({
      model: "tito-sim",
      prompt,
      max_tokens: 8,
      return_token_ids: true,
      cache_salt: "a",
    });
    const first = await post("/v1/completions", body(opening));
    assert.is(first.status, 200);
    const again = await post("/v1/completions", body(followUp(first.json.choices[0]!.token_ids)));
    if (details) {
      assert.equal(first.json.usage.prompt_tokens_details, { cached_tokens: 0 });
      assert.ok(again.json.usage.prompt_tokens_details!.cached_tokens > 0);
    } else assert.is(again.json.usage.prompt_tokens_details, null);
  }
});

test("salt fields of the wrong type are refused as upstream refuses them", async () => {
  const post = engine();
  const sampling = { max_new_tokens: 4 };
  for (const [field, value, says] of [
    ["extra_key", ["a"], "extra_key should be a string for a single request."],
    ["cache_salt", ["a", "b"], "cache_salt should be a string for a single request."],
    ["extra_key", 5, "extra_key"],
    ["cache_salt", { a: 1 }, "cache_salt"],
  ] as const) {
    const res = await post("/generate", { input_ids: opening, sampling_params: sampling, [field]: value });
    assert.is(res.status, 400, `${field}=${JSON.stringify(value)}`);
    assert.match(res.json.error.message, says);
    const chat = await post("/v1/chat/completions", { messages: [{ role: "user", content: "x" }], [field]: value });
    assert.is(chat.status, 400);
  }
  for (const value of ["", "x".repeat(1025), 7, ["a"]]) {
    const res = await post("/v1/completions", { model: "tito-sim", prompt: opening, max_tokens: 4, cache_salt: value });
    assert.is(res.status, 400, JSON.stringify(value).slice(0, 40));
    assert.match(res.json.error.message, "cache_salt");
  }
  const longest = await post("/v1/completions", {
    model: "tito-sim",
    prompt: opening,
    max_tokens: 4,
    cache_salt: "x".repeat(1024),
  });
  assert.is(longest.status, 200);
});

test("without prefixCache the same request gives the same reply (cached_tokens 0 on /generate, none on chat)", async () => {
  const post = engine({ prefixCache: false });
  const body = { input_ids: opening, extra_key: "v1", sampling_params: { max_new_tokens: 8 } };
  const [a, b] = [await post("/generate", body), await post("/generate", body)];
  assert.is(a.json.meta_info.cached_tokens, 0);
  assert.is(b.json.meta_info.cached_tokens, 0);
  const chat = await post("/v1/chat/completions", { messages: [{ role: "user", content: "x" }], input_ids: opening });
  assert.not.ok("cached_tokens" in chat.json.choices[0]!.meta_info);
});

test.run();
