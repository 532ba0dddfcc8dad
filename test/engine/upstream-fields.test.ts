// Holds the adapters (and the simulated engine) to the upstream oracle of upstream-golden.ts:
// every field an adapter sends is one its upstream accepts, a golden reply holding only
// upstream's fields is enough for a turn (so nothing is read that upstream does not return),
// and the simulated engine answers with upstream's fields only.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { createServer, type Server } from "node:http";
import { createEngine, type EngineApi } from "../../engine/index.ts";
import { createSessionCore, type SessionCore } from "../../sessions/index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { responseText } from "../helpers/core.ts";
import { WEATHER_TOOL, qwen3 } from "../sessions/fixtures.ts";
import { ACCEPTS, FINISH_REASONS, GOLDEN_REPLIES, RETURNS } from "./upstream-golden.ts";

const folder = qwen3();
const sent: Array<{ route: string; body: Record<string, unknown> }> = [];
let engine: SimEngine;
const cores: SessionCore[] = [];
const servers: Server[] = [];
test.before(async () => {
  engine = await startSimEngine({
    tokenizerFolder: folder,
    beforeReply: (body, route) => void sent.push({ route, body: body as Record<string, unknown> }),
  });
});
test.after(async () => {
  for (const c of cores) await c.close();
  for (const s of servers) await new Promise((r) => s.close(r));
  await engine?.close();
});

function core(api: EngineApi, engineUrl = engine.url, replay = false): SessionCore {
  const adapter = createEngine({
    api,
    engineUrl,
    timeoutMs: 30_000,
    connectTimeoutMs: 5_000,
    routingReplay: replay,
    indexerReplay: false,
    dropAuthorization: false,
    pooledReplies: false,
  });
  const c = createSessionCore({ engine: adapter, tokenizerFolder: folder });
  cores.push(c);
  return c;
}

async function turn(c: SessionCore, body: Record<string, unknown>) {
  const id = JSON.parse(await responseText(await c.create())).session_id as string;
  const full = {
    model: "gpt-4o",
    messages: [{ role: "user", content: "Weather in Paris?" }],
    tools: [WEATHER_TOOL],
    ...body,
  };
  const res = await c.chat(
    id,
    {
      method: "POST",
      path: "/v1/chat/completions",
      query: "",
      headers: {},
      body: Buffer.from(JSON.stringify(full)),
    },
    undefined,
    // A weight version: the request carries the cache salt field (extra_key / cache_salt) too.
    { weightVersion: "v1" },
  );
  return { status: res.status, text: await responseText(res) };
}

const unknown = (keys: string[], allowed: readonly string[]) => keys.filter((k) => !allowed.includes(k));

/** Every client field the token-level APIs map, set. */
const SAMPLING = {
  temperature: 0.7,
  top_p: 0.9,
  top_k: 5,
  min_p: 0.05,
  max_tokens: 300,
  stop: ["\n\nUser:"],
  seed: 7,
  frequency_penalty: 0.1,
  presence_penalty: 0.1,
  repetition_penalty: 1.05,
};

for (const api of ["sglang-chat", "sglang-generate", "vllm-completions"] as const)
  for (const stream of [false, true])
    for (const format of [undefined, { type: "json_object" }])
      test(`${api}${stream ? ", streamed" : ""}${format ? ", json_object" : ""}: every field sent is one upstream accepts`, async () => {
        const before = sent.length;
        const res = await turn(core(api, engine.url, true), {
          ...SAMPLING,
          stream,
          ...(format && { response_format: format }),
        });
        assert.is(res.status, 200, res.text);
        const body = sent.slice(before).at(-1)!.body;
        const row = ACCEPTS[api]!;
        assert.equal(unknown(Object.keys(body), row.fields), [], `${row.source.file} @ ${row.source.commit}`);
        if (api === "sglang-generate") {
          const sp = ACCEPTS["sglang-generate sampling_params"]!;
          assert.equal(unknown(Object.keys(body.sampling_params as object), sp.fields), [], sp.source.file);
        }
        if (api === "vllm-completions" && body.structured_outputs) {
          const so = ACCEPTS["vllm-completions structured_outputs"]!;
          assert.equal(unknown(Object.keys(body.structured_outputs as object), so.fields), [], so.source.file);
        }
      });

test("vllm-completions: a golden reply with only vLLM's fields makes a turn; its abort finish reason is a 503", async () => {
  const ids = [...folder.encode("It is sunny."), folder.tokenId("<|im_end|>")!];
  let finish = "stop";
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json" });
      const reply =
        req.url === "/v1/models"
          ? GOLDEN_REPLIES.vllmModels("served", 4096)
          : GOLDEN_REPLIES.vllm(ids, "It is sunny.", finish);
      res.end(JSON.stringify(reply));
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const c = core("vllm-completions", url);
  const ok = await turn(c, {});
  assert.is(ok.status, 200, ok.text);
  assert.is(JSON.parse(ok.text).choices[0].message.content, "It is sunny.");
  assert.ok(FINISH_REASONS.vllm!.fields.includes("abort"));
  finish = "abort";
  const aborted = await turn(c, {});
  assert.is(aborted.status, 503, aborted.text);
});

test("the simulated engine answers with upstream's fields only (vLLM completions and models, SGLang chat choices)", async () => {
  const prompt = folder.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  const post = async (path: string, body: unknown) =>
    (await (
      await fetch(`${engine.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      })
    ).json()) as Record<string, unknown>;
  const v = await post("/v1/completions", { prompt, max_tokens: 50, logprobs: 0, return_token_ids: true });
  assert.equal(unknown(Object.keys(v), RETURNS["vllm-completions"]!.fields), []);
  const choice = (v.choices as Array<Record<string, unknown>>)[0]!;
  assert.equal(unknown(Object.keys(choice), RETURNS["vllm-completions choice"]!.fields), []);
  assert.equal(unknown(Object.keys(choice.logprobs as object), RETURNS["vllm-completions logprobs"]!.fields), []);
  const models = (await (await fetch(`${engine.url}/v1/models`)).json()) as { data: Array<Record<string, unknown>> };
  assert.equal(unknown(Object.keys(models.data[0]!), RETURNS["vllm /v1/models card"]!.fields), []);
  const chat = await post("/v1/chat/completions", {
    messages: [{ role: "user", content: "hi" }],
    return_meta_info: true,
    logprobs: true,
  });
  const chatChoice = (chat.choices as Array<Record<string, unknown>>)[0]!;
  assert.equal(unknown(Object.keys(chatChoice), RETURNS["sglang-chat choice"]!.fields), []);
});

test.run();
