// Issue 38, "Streaming: … both SGLang stream shapes (before and after PR #21583) and vLLM's
// give the same record as the unstreamed reply": on every engine API and every stream shape
// the simulated engine speaks, a streamed turn and an unstreamed one of the same request
// (the engine is deterministic) record the same text, ids and logprobs, and the session's
// trajectory ends with the same ids. Through the session core with the adapters a worker
// wires (engine/index.ts), the bundled Qwen3 tokenizer, a thinking model and a tool.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { createEngine, type EngineApi } from "../../engine/index.ts";
import { createSessionCore, type SessionCore } from "../../sessions/index.ts";
import { startSimEngine, type SimEngineOptions } from "../../server/sim-engine/sim-engine.ts";
import { responseText } from "../helpers/core.ts";
import { WEATHER_TOOL, qwen3 } from "../sessions/fixtures.ts";

const folder = qwen3();
const cleanup: Array<() => Promise<unknown> | void> = [];
test.after(async () => {
  for (const c of cleanup.reverse()) await c();
});

type Rec = Record<string, unknown>;

/** What a record says the model generated, per API: text, ids, logprobs, count. */
const PICK: Record<EngineApi, (r: Rec) => unknown> = {
  "sglang-generate": (r) => {
    const m = r.meta_info as Rec;
    return { text: r.text, ids: r.output_ids, lp: m.output_token_logprobs, n: m.completion_tokens };
  },
  "vllm-completions": (r) => {
    const c = (r.choices as Rec[])[0]!;
    return { text: c.text, ids: c.token_ids, lp: c.logprobs, n: (r.usage as Rec).completion_tokens };
  },
  "sglang-chat": (r) => {
    const c = (r.choices as Rec[])[0]!;
    const m = c.meta_info as Rec | undefined;
    return { message: c.message, lp: m?.output_token_logprobs ?? c.logprobs, n: (r.usage as Rec).completion_tokens };
  },
};

const SHAPES: Array<[EngineApi, string, SimEngineOptions]> = [
  ["sglang-generate", "cumulative (default)", {}],
  ["sglang-generate", "--incremental-streaming-output, after #21583", { incrementalStreaming: true }],
  [
    "sglang-generate",
    "--incremental-streaming-output, before #21583 (cumulative logprobs)",
    { incrementalStreaming: true, cumulativeLogprobs: true },
  ],
  ["vllm-completions", "return_token_ids", {}],
  ["vllm-completions", 'before 0.10.2 ("token_id:N" only)', { vllmNoTokenIds: true }],
  ["sglang-chat", "asked without a stream", {}],
];

async function rig(api: EngineApi, sim: SimEngineOptions): Promise<SessionCore> {
  const engine = await startSimEngine({ tokenizerFolder: folder, reasoning: true, ...sim });
  const core = createSessionCore({
    engine: createEngine({
      api,
      engineUrl: engine.url,
      timeoutMs: 60_000,
      connectTimeoutMs: 10_000,
      routingReplay: false,
      indexerReplay: false,
      dropAuthorization: false,
      pooledReplies: false,
    }),
    tokenizerFolder: folder,
  });
  cleanup.push(
    () => engine.close(),
    () => core.close(),
  );
  return core;
}

const session = async (c: SessionCore) => JSON.parse(await responseText(await c.create())).session_id as string;

async function turn(c: SessionCore, id: string, body: Rec): Promise<string> {
  const res = await c.chat(id, {
    method: "POST",
    path: "/v1/chat/completions",
    query: "",
    headers: {},
    body: Buffer.from(JSON.stringify(body)),
  });
  const text = await responseText(res);
  assert.is(res.status, 200, text);
  return text;
}

async function recordOf(c: SessionCore, id: string) {
  const got = JSON.parse(await responseText(await c.get(id))) as {
    records: Array<{ response: Rec }>;
    metadata: { accumulated_token_ids: number[] };
  };
  assert.is(got.records.length, 1);
  return { response: got.records[0]!.response, ids: got.metadata.accumulated_token_ids };
}

// Two requests: one the model answers with reasoning and a tool call, one with reasoning and
// text (the simulated engine's reply depends on the conversation), each with a stop string
// the reply does not contain, so the streamed text is held back and released as upstream does.
const REQUESTS: Rec[] = [
  { model: "m", messages: [{ role: "user", content: "Weather in Paris?" }], tools: [WEATHER_TOOL] },
  { model: "m", messages: [{ role: "user", content: "Say hi — naïve café ☕ 日本" }], stop: ["zzz-never"] },
];

for (const [api, shape, sim] of SHAPES)
  test(`${api}, ${shape}: the streamed turn records the same text, ids and logprobs as the unstreamed one`, async () => {
    const core = await rig(api, sim);
    for (const request of REQUESTS) {
      const [a, b] = [await session(core), await session(core)];
      const streamed = await turn(core, a, { ...request, stream: true });
      assert.ok(streamed.endsWith("data: [DONE]\n\n"), streamed);
      await turn(core, b, request);
      const [ra, rb] = [await recordOf(core, a), await recordOf(core, b)];
      const picked = PICK[api](rb.response) as Rec;
      assert.ok((picked.n as number) > 0, "the reply generated tokens");
      assert.equal(PICK[api](ra.response), picked, `${shape}: ${JSON.stringify(request.messages)}`);
      assert.equal(ra.ids, rb.ids, "the trajectories end with the same ids");
    }
  });

test.run();
