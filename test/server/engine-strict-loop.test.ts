// Issue 38's "Done when", through the router and a worker (the in-process tree): a tool loop on
// each engine API against the simulated engine in its strictest mode (vLLM: 404 for a model
// it does not serve, null max_tokens -> 500) with the `openai` client sending model "gpt-4o"
// and no max_tokens, exact end to end; and an engine abort mid-turn on each API (SGLang's
// /abort_request while the request is at the engine) that leaves the session unchanged,
// counts in tito_engine_aborts_total, and whose retried turn commits once.
import { test } from "uvu";
import * as assert from "uvu/assert";
import OpenAI from "openai";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { call, newSession, WEATHER_TOOL } from "../helpers/server.ts";
import { recordIds, type RawRecord } from "../helpers/turn-records.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

type Api = "sglang-chat" | "sglang-generate" | "vllm-completions";
const APIS: Api[] = ["sglang-chat", "sglang-generate", "vllm-completions"];

let engine: SimEngine;
let abortNext = false;
const servers: InProcessTree[] = [];

test.before(async () => {
  engine = await startSimEngine({
    tokenizerFolder: sharedFolder(),
    vllmNullMaxTokens: "500",
    beforeReply: async () => {
      if (!abortNext) return;
      abortNext = false;
      const res = await fetch(`${engine.url}/abort_request`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ abort_all: true }),
      });
      assert.is(res.status, 200);
    },
  });
});
test.after(async () => {
  for (const s of servers) await s.shutdown();
  await engine?.close();
});

async function serve(api: Api): Promise<InProcessTree> {
  const server = await startTree({
    engineUrl: engine.url,
    engineApi: api,
    workers: 1,
    tokenizerFolder: sharedFolder(),
  });
  servers.push(server);
  return server;
}

const recordsOf = async (url: string, id: string) =>
  (await call<{ records: RawRecord[] }>(url, "GET", `/sessions/${id}`)).json.records;

for (const api of APIS)
  test(`${api}: a tool loop with model "gpt-4o" and no max_tokens is exact end to end; an engine abort is retried and committed once`, async () => {
    const server = await serve(api);
    const id = await newSession(server.url);
    const client = new OpenAI({ baseURL: `${server.url}/sessions/${id}/v1`, apiKey: "unused", maxRetries: 0 });
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: "system", content: "You are helpful." },
      { role: "user", content: "What is the weather in Paris?" },
    ];
    const tools = [WEATHER_TOOL] as OpenAI.Chat.ChatCompletionTool[];
    const first = await client.chat.completions.create({ model: "gpt-4o", messages, tools });
    assert.is(first.choices[0]!.finish_reason, "tool_calls");
    const call0 = first.choices[0]!.message.tool_calls![0]! as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    messages.push(first.choices[0]!.message, { role: "tool", tool_call_id: call0.id, content: '{"temp_c": 21}' });

    // The engine aborts the second turn while generating it: a retryable 503, nothing recorded.
    abortNext = true;
    const aborted = await call<{ error: string; code: string }>(
      server.url,
      "POST",
      `/sessions/${id}/v1/chat/completions`,
      {
        model: "gpt-4o",
        messages,
        tools,
      },
    );
    assert.is(aborted.status, 503, aborted.text);
    assert.is(aborted.json.code, "TITO_ERR_ENGINE_ABORTED");
    assert.is(aborted.headers.get("retry-after"), "1");
    assert.is((await recordsOf(server.url, id)).length, 1);

    const second = await client.chat.completions.create({ model: "gpt-4o", messages, tools });
    assert.is(second.choices[0]!.finish_reason, "stop");
    if (api !== "sglang-chat") assert.is(second.model, "gpt-4o", "the client's model echoed");
    const records = await recordsOf(server.url, id);
    assert.is(records.length, 2, "the retried turn committed once");
    const [r0, r1] = records.map(recordIds);
    assert.equal(r1!.prompt.slice(0, r0!.prompt.length + r0!.completion.length), [...r0!.prompt, ...r0!.completion]);
    if (api === "vllm-completions")
      for (const r of records) {
        const request = r.request as { model?: unknown; max_tokens?: unknown };
        assert.is(request.model, "tito-sim");
        assert.type(request.max_tokens, "number");
      }
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(metrics, /tito_engine_aborts_total\{shard="0"\} 1/);
  });

test.run();
