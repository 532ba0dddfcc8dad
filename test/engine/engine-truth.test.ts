// Issue 38, "Engines as they really are": each numbered point of the issue against the
// simulated engine in its strictest mode (vLLM 404 on unknown names, null max_tokens -> 500),
// through the session core with the adapters a worker wires (engine/index.ts).
import { test } from "uvu";
import * as assert from "uvu/assert";
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { createEngine, type EngineApi } from "../../engine/index.ts";
import { createSessionCore, messagesTurn, type CoreResponse, type SessionCore } from "../../sessions/index.ts";
import { startSimEngine, type SimEngine, type SimEngineOptions } from "../../server/sim-engine/sim-engine.ts";
import { simExpert } from "../../server/sim-engine/sim-engine-completions.ts";
import { bundledQwen3Dir } from "../../sessions/tokenizer-folder.ts";
import { responseText } from "../helpers/core.ts";
import { WEATHER_TOOL, folderAt, qwen3 } from "../sessions/fixtures.ts";

const folder = qwen3();
const APIS: EngineApi[] = ["sglang-chat", "sglang-generate", "vllm-completions"];
const cleanup: Array<() => Promise<unknown> | void> = [];
test.after(async () => {
  for (const c of cleanup.reverse()) await c();
});

interface Rig {
  engine: SimEngine;
  core: SessionCore;
  /** Bodies the engine got, by route. */
  sent: Array<{ route: string; body: Record<string, unknown> }>;
  aborts: { n: number };
  /** Set: the next generation request is aborted (POST /abort_request) while it is at the engine. */
  abortNext: { on: boolean };
}

async function rig(
  api: EngineApi,
  sim: SimEngineOptions = {},
  core: { tokenizerDir?: string; generationConfig?: boolean; engineModel?: string; routingReplay?: boolean } = {},
): Promise<Rig> {
  const sent: Rig["sent"] = [];
  const abortNext = { on: false };
  let url = "";
  const engine = await startSimEngine({
    tokenizerFolder: folder,
    ...sim,
    beforeReply: async (body, route) => {
      sent.push({ route, body: body as Record<string, unknown> });
      if (!abortNext.on) return;
      abortNext.on = false;
      const res = await fetch(`${url}/abort_request`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ abort_all: true }),
      });
      assert.is(res.status, 200);
    },
  });
  url = engine.url;
  const aborts = { n: 0 };
  const adapter = createEngine({
    api,
    engineUrl: engine.url,
    timeoutMs: 60_000,
    connectTimeoutMs: 10_000,
    routingReplay: core.routingReplay ?? false,
    indexerReplay: false,
    dropAuthorization: false,
    pooledReplies: false,
    onEngineAbort: () => aborts.n++,
    engineModel: core.engineModel,
  });
  const c = createSessionCore({
    engine: adapter,
    tokenizerFolder: core.tokenizerDir ? folderAt(core.tokenizerDir) : folder,
    generationConfig: core.generationConfig,
  });
  cleanup.push(
    () => engine.close(),
    () => c.close(),
  );
  return { engine, core: c, sent, aborts, abortNext };
}

const session = async (c: SessionCore) => JSON.parse(await responseText(await c.create())).session_id as string;

function chat(c: SessionCore, id: string, body: Record<string, unknown>) {
  const full = { model: "gpt-4o", messages: [{ role: "user", content: "Weather in Paris?" }], ...body };
  return c.chat(id, {
    method: "POST",
    path: "/v1/chat/completions",
    query: "",
    headers: {},
    body: Buffer.from(JSON.stringify(full)),
  });
}

async function records(c: SessionCore, id: string) {
  return JSON.parse(await responseText(await c.get(id))) as {
    records: Array<{ request: Record<string, unknown>; response: Record<string, unknown> }>;
    metadata: Record<string, unknown>;
  };
}

// Points 1 and 2: the served name and max_model_len from GET /v1/models.
test("vllm-completions: the served model name and max_tokens = max_model_len - prompt; the client's model echoed", async () => {
  const r = await rig("vllm-completions", { maxModelLen: 4096 });
  const id = await session(r.core);
  const res = await chat(r.core, id, {});
  const reply = JSON.parse(await responseText(res));
  assert.is(res.status, 200, JSON.stringify(reply));
  assert.is(reply.model, "gpt-4o");
  const sent = r.sent.at(-1)!.body;
  assert.is(sent.model, "tito-sim");
  const prompt = (sent.prompt as number[]).length;
  assert.is(sent.max_tokens, 4096 - prompt);
  assert.is(reply.choices[0].finish_reason, "stop", "not cut at vLLM's 16-token default");
});

test("vllm-completions: a prompt already at max_model_len is a budget 400 naming the lengths, nothing sent", async () => {
  const r = await rig("vllm-completions", { maxModelLen: 12 });
  const id = await session(r.core);
  const before = r.engine.requests;
  const res = await chat(r.core, id, {});
  const body = JSON.parse(await responseText(res));
  assert.is(res.status, 400, JSON.stringify(body));
  assert.is(body.code, "TITO_ERR_BUDGET");
  assert.match(body.error, /the prompt has \d+ tokens and the engine's context length is 12/);
  assert.is(r.engine.requests, before);
});

test("vllm-completions: --engine-model wins over /v1/models; an unknown name is vLLM's 404, passed on", async () => {
  const r = await rig("vllm-completions", { model: "served" }, { engineModel: "other" });
  const res = await chat(r.core, await session(r.core), {});
  assert.is(res.status, 404);
  assert.match(await responseText(res), /The model `other` does not exist/);
  const ok = await rig("vllm-completions", { model: "served" }, { engineModel: "served" });
  assert.is((await chat(ok.core, await session(ok.core), {})).status, 200);
  assert.is(ok.sent.at(-1)!.body.model, "served");
});

test("sim engine, vLLM mode: null max_tokens is a 500 (released vLLM) or 16 tokens (newer), by flag", async () => {
  for (const [mode, status] of [
    ["500", 500],
    ["16", 200],
  ] as const) {
    const e = await startSimEngine({ tokenizerFolder: folder, vllmNullMaxTokens: mode });
    cleanup.push(() => e.close());
    const prompt = folder.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    const res = await fetch(`${e.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt, max_tokens: null, return_token_ids: true }),
    });
    const body = (await res.json()) as { choices?: Array<{ token_ids: number[] }> };
    assert.is(res.status, status);
    if (status === 200) assert.ok(body.choices![0]!.token_ids.length <= 16);
    const models = (await (await fetch(`${e.url}/v1/models`)).json()) as { data: Array<{ max_model_len: number }> };
    assert.is(models.data[0]!.max_model_len, 40960);
  }
});

// Point 4: an engine abort is never committed, on every API, streamed or not.
for (const api of APIS)
  for (const stream of [false, true])
    test(`${api}${stream ? ", streamed" : ""}: an engine abort is a 503 TITO_ERR_ENGINE_ABORTED, the session unchanged, the retry commits once`, async () => {
      const r = await rig(api);
      const id = await session(r.core);
      r.abortNext.on = true;
      const res = await chat(r.core, id, { stream });
      const text = await responseText(res);
      if (stream && res.status === 200) {
        assert.not.ok(text.includes("data: [DONE]"), text);
        assert.match(text, /"type":"TITO_ERR_ENGINE_ABORTED"/);
      } else {
        assert.is(res.status, 503, text);
        assert.is(res.headers["retry-after"], "1");
        assert.is(JSON.parse(text).code, "TITO_ERR_ENGINE_ABORTED");
      }
      assert.is(r.aborts.n, 1, "tito_engine_aborts_total's callback");
      assert.is((await records(r.core, id)).records.length, 0);
      const again = await chat(r.core, id, { stream });
      const againText = await responseText(again);
      assert.is(again.status, 200, againText);
      if (stream) assert.ok(againText.endsWith("data: [DONE]\n\n"));
      assert.is((await records(r.core, id)).records.length, 1);
    });

test("Anthropic route: an engine abort is overloaded_error as 529 with a request_id; the retry commits", async () => {
  const r = await rig("sglang-generate");
  const id = await session(r.core);
  const turn = (stream: boolean) =>
    messagesTurn(r.core, id, {
      method: "POST",
      path: "/v1/messages",
      query: "",
      headers: {},
      body: Buffer.from(
        JSON.stringify({ model: "claude-x", max_tokens: 200, stream, messages: [{ role: "user", content: "hi" }] }),
      ),
    });
  r.abortNext.on = true;
  const res = await turn(false);
  const body = JSON.parse(await responseText(res));
  assert.is(res.status, 529);
  assert.is(body.error.type, "overloaded_error");
  assert.match(body.request_id, /^req_/);
  assert.is((await records(r.core, id)).records.length, 0);
  assert.is((await turn(false)).status, 200);
  assert.is((await records(r.core, id)).records.length, 1);
});

// Point 3: samples from vLLM records that carry ids only as "token_id:N", streamed or not.
for (const stream of [false, true])
  test(`vllm-completions before 0.10.2${stream ? ", streamed" : ""}: samples read the "token_id:N" ids`, async () => {
    const r = await rig("vllm-completions", { vllmNoTokenIds: true });
    const id = await session(r.core);
    const res = await chat(r.core, id, { stream });
    await responseText(res);
    assert.is(res.status, 200);
    const rec = (await records(r.core, id)).records[0]!;
    assert.is((rec.response.choices as Array<{ token_ids: unknown }>)[0]!.token_ids, null);
    const samples = await r.core.samples(id, {
      method: "POST",
      path: "/samples",
      query: "",
      headers: {},
      body: Buffer.from("{}"),
    });
    const sample = JSON.parse(await responseText(samples));
    assert.is(samples.status, 200, JSON.stringify(sample));
    const ids = (rec.response.choices as Array<{ logprobs: { tokens: string[] } }>)[0]!.logprobs.tokens.map((t) =>
      Number(t.slice(9)),
    );
    assert.equal(sample.tokens.slice(-ids.length), ids);
  });

// Point 5: the record metadata names the engine API (whose logprobs the records hold).
test("session metadata carries engine_api", async () => {
  for (const api of APIS) {
    const r = await rig(api);
    const id = await session(r.core);
    assert.is((await records(r.core, id)).metadata.engine_api, api);
  }
});

// Point 6: generation_config.json fills in what the client left unset, on every API; off keeps the engine's.
test("generation_config.json sampling defaults on every engine API; the client's own win; --generation-config off", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tito-genconfig-"));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  cpSync(bundledQwen3Dir(), dir, { recursive: true });
  writeFileSync(join(dir, "generation_config.json"), JSON.stringify({ temperature: 0.6, top_p: 0.95, top_k: 20 }));
  const sampling = (r: Rig) => {
    const b = r.sent.at(-1)!.body;
    return (b.sampling_params as Record<string, unknown> | undefined) ?? b;
  };
  for (const api of APIS) {
    const r = await rig(api, {}, { tokenizerDir: dir });
    await chat(r.core, await session(r.core), { temperature: 1.0 });
    const s = sampling(r);
    assert.equal([s.temperature, s.top_p, s.top_k], [1.0, 0.95, 20], api);
    const off = await rig(api, {}, { tokenizerDir: dir, generationConfig: false });
    await chat(off.core, await session(off.core), {});
    const o = sampling(off);
    assert.equal([o.temperature, o.top_p, o.top_k], [undefined, undefined, undefined], api);
  }
});

// Point 7: SGLang's /generate stream before PR #21583 (delta text and ids, cumulative logprobs).
test("sglang-generate: a stream from SGLang before #21583 records the same reply as unstreamed", async () => {
  for (const sim of [{ incrementalStreaming: true, cumulativeLogprobs: true }, { incrementalStreaming: true }, {}]) {
    const r = await rig("sglang-generate", { reasoning: true, ...sim });
    const [a, b] = [await session(r.core), await session(r.core)];
    const streamed = await chat(r.core, a, { stream: true, tools: [WEATHER_TOOL] });
    assert.ok((await responseText(streamed)).endsWith("data: [DONE]\n\n"), JSON.stringify(sim));
    await responseText(await chat(r.core, b, { tools: [WEATHER_TOOL] }));
    const [ra, rb] = [(await records(r.core, a)).records[0]!, (await records(r.core, b)).records[0]!];
    const pick = (x: Record<string, unknown>) => {
      const m = x.meta_info as Record<string, unknown>;
      return { text: x.text, ids: x.output_ids, lp: m.output_token_logprobs, n: m.completion_tokens };
    };
    assert.equal(pick(ra.response), pick(rb.response), JSON.stringify(sim));
  }
});

// Points 8 and 9: json_object as an object schema; top_k 0 refused on the SGLang APIs.
test("json_object: an object schema for SGLang, structured_outputs.json_object for vLLM", async () => {
  const g = await rig("sglang-generate");
  await chat(g.core, await session(g.core), { response_format: { type: "json_object" } });
  assert.equal(JSON.parse((g.sent.at(-1)!.body.sampling_params as { json_schema: string }).json_schema), {
    type: "object",
  });
  const v = await rig("vllm-completions");
  await chat(v.core, await session(v.core), { response_format: { type: "json_object" } });
  assert.equal(v.sent.at(-1)!.body.structured_outputs, { json_object: true });
});

test("top_k 0: a 400 naming the field on the SGLang APIs, nothing sent; vLLM takes it", async () => {
  for (const api of ["sglang-chat", "sglang-generate"] as const) {
    const r = await rig(api);
    const res: CoreResponse = await chat(r.core, await session(r.core), { top_k: 0 });
    assert.is(res.status, 400, api);
    assert.match(JSON.parse(await responseText(res)).error, /`top_k` must be -1 \(disable\) or at least 1/);
    assert.is(r.engine.requests, 0);
  }
  const v = await rig("vllm-completions");
  assert.is((await chat(v.core, await session(v.core), { top_k: 0 })).status, 200);
});

// Point 10: vLLM's routed experts (.npy of any dtype) give samples the same shape as SGLang's int32.
const sampleOf = async (r: Rig, id: string) => {
  const res = await r.core.samples(id, {
    method: "POST",
    path: "/samples",
    query: "",
    headers: {},
    body: Buffer.from("{}"),
  });
  const text = await responseText(res);
  assert.is(res.status, 200, text);
  return JSON.parse(text) as { tokens: number[]; rollout_routed_experts: number[][] };
};

test("samples: vLLM's .npy routed experts (uint8, uint16, int32) read as SGLang's int32 rows", async () => {
  const shape = { routedExpertsLayers: 4, routedExpertsTopK: 2 };
  const g = await rig("sglang-generate", shape, { routingReplay: true });
  const gid = await session(g.core);
  await responseText(await chat(g.core, gid, {}));
  const sglang = await sampleOf(g, gid);
  for (const dtype of ["uint8", "uint16", "int32"] as const) {
    const v = await rig("vllm-completions", { ...shape, vllmRoutedExperts: dtype }, { routingReplay: true });
    const id = await session(v.core);
    await responseText(await chat(v.core, id, {}));
    const sample = await sampleOf(v, id);
    assert.is(sample.rollout_routed_experts.length, sample.tokens.length - 1, dtype);
    assert.is(sample.rollout_routed_experts[0]!.length, sglang.rollout_routed_experts[0]!.length, dtype);
    sample.rollout_routed_experts.forEach((row, t) =>
      row.forEach((e, i) => assert.is(e, simExpert(t, Math.floor(i / 2), i % 2), `${dtype} [${t}][${i}]`)),
    );
  }
});

test.run();
