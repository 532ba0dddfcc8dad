// Streamed turns on the token-level engine APIs at the session core, against engines that
// stream in each wire format: the simulated engine in SGLang's two modes (cumulative, and
// --incremental-streaming-output) whose record is the reply a stream: false request gets,
// routing payload included; and canned engines for what the simulated one does not do:
// vLLM's older error shape, a stream that ends before its last chunk, an engine that
// answers stream: true with JSON, a first chunk that shows the engine ignored the ids
// (502s before any event), and a commit that fails (an error event instead of [DONE]).
import { test } from "uvu";
import * as assert from "uvu/assert";
import { createServer, type Server } from "node:http";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { JournalRecordStore, type CoreResponse, type SessionCore } from "../../sessions/index.ts";
import type { EngineApi } from "../../engine/index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { coreFor } from "../helpers/core.ts";
import { qwen3, WEATHER_TOOL } from "../sessions/fixtures.ts";

const folder = qwen3();
const root = mkdtempSync(join(tmpdir(), "tito-token-stream-"));
let cumulative: SimEngine;
let incremental: SimEngine;
let canned: Server;
let cannedUrl: string;
let reply: (prompt: number) => { type?: string; body: string } = () => ({ body: "" });
const cores: SessionCore[] = [];

test.before(async () => {
  cumulative = await startSimEngine({ tokenizerFolder: folder, reasoning: true, routedExpertsBytes: 3000 });
  incremental = await startSimEngine({ tokenizerFolder: folder, reasoning: true, incrementalStreaming: true });
  canned = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      // vllm-completions reads the served model and its context length first.
      if (req.url === "/v1/models")
        return void res.end(JSON.stringify({ object: "list", data: [{ id: "m", max_model_len: 40960 }] }));
      const request = JSON.parse(body) as { input_ids?: number[]; prompt?: number[] };
      const r = reply((request.input_ids ?? request.prompt)!.length);
      res.writeHead(200, { "content-type": r.type ?? "text/event-stream" });
      res.end(r.body);
    });
  });
  await new Promise<void>((r) => canned.listen(0, "127.0.0.1", r));
  cannedUrl = `http://127.0.0.1:${(canned.address() as { port: number }).port}`;
});
test.after(async () => {
  for (const c of cores) await c.close();
  await cumulative?.close();
  await incremental?.close();
  await new Promise((r) => canned?.close(r));
  rmSync(root, { recursive: true, force: true });
});

async function core(engineUrl: string, engineApi: EngineApi, options: { dir?: string; replay?: boolean } = {}) {
  const recordStore = options.dir
    ? await JournalRecordStore.open({ dir: options.dir, fsync: "every", segmentBytes: 1024 })
    : undefined;
  const c = coreFor({ engineUrl, engineApi, tokenizerFolder: folder, routingReplay: options.replay, recordStore });
  cores.push(c);
  return c;
}

async function text(res: CoreResponse): Promise<string> {
  if (Buffer.isBuffer(res.body)) return res.body.toString();
  const parts: Buffer[] = [];
  for await (const piece of res.body as AsyncIterable<Buffer>) parts.push(piece);
  return Buffer.concat(parts).toString();
}

async function session(c: SessionCore): Promise<string> {
  return JSON.parse(await text(await c.create())).session_id;
}

const chat = (c: SessionCore, id: string, stream: boolean, extra: Record<string, unknown> = {}) =>
  c.chat(id, {
    method: "POST",
    path: "/v1/chat/completions",
    query: "",
    headers: {},
    body: Buffer.from(
      JSON.stringify({
        model: "m",
        stream,
        messages: [{ role: "user", content: "Weather in Paris?" }],
        tools: [WEATHER_TOOL],
        ...extra,
      }),
    ),
  });

interface Got {
  records: Array<{ response: { text: string; output_ids: number[]; meta_info: Record<string, unknown> } }>;
  metadata: { accumulated_token_ids: number[] };
}
const got = async (c: SessionCore, id: string) => JSON.parse(await text(await c.get(id))) as Got;
const withoutIds = (v: unknown) => JSON.parse(JSON.stringify(v, (k, x) => (k === "id" ? undefined : x)));

for (const [mode, engine] of [
  ["cumulative", () => cumulative],
  ["incremental", () => incremental],
] as const)
  test(`sglang-generate, ${mode} chunks: the record is the reply a stream: false request gets`, async () => {
    const c = await core(engine().url, "sglang-generate", { replay: true });
    const [a, b] = [await session(c), await session(c)];
    const streamed = await chat(c, a, true);
    assert.is(streamed.status, 200);
    assert.match(streamed.headers["content-type"]!, /^text\/event-stream/);
    assert.ok((await text(streamed)).endsWith("data: [DONE]\n\n"));
    assert.is((await chat(c, b, false)).status, 200);
    const [ra, rb] = [(await got(c, a)).records[0]!.response, (await got(c, b)).records[0]!.response];
    assert.equal(withoutIds(ra), withoutIds(rb));
    assert.is(typeof ra.meta_info.routed_experts, "string", "the routing payload is in the record");
  });

const sse = (...events: unknown[]) =>
  events.map((e) => `data: ${typeof e === "string" ? e : JSON.stringify(e)}\n\n`).join("");
const vllmChunk = (text: string, ids: number[], finish: string | null = null) => ({
  id: "cmpl-1",
  object: "text_completion",
  choices: [
    {
      index: 0,
      text,
      logprobs: { token_logprobs: ids.map(() => -0.5), tokens: [], text_offset: [], top_logprobs: [] },
      finish_reason: finish,
      token_ids: ids,
    },
  ],
});
const HELLO = folder.encode("Hello");

const FAULTS: Array<{
  name: string;
  api: EngineApi;
  body: (prompt: number) => string;
  type?: string;
  message: string;
  midway: boolean;
}> = [
  {
    name: "vLLM's older error shape midway",
    api: "vllm-completions",
    body: () =>
      sse(
        vllmChunk("Hello", HELLO),
        { object: "error", message: "CUDA out of memory", type: "InternalServerError", code: 500 },
        "[DONE]",
      ),
    message: "the engine failed the generation: CUDA out of memory",
    midway: true,
  },
  {
    name: "a stream that ends before a chunk with a finish reason",
    api: "vllm-completions",
    body: () => sse(vllmChunk("Hello", HELLO), "[DONE]"),
    message: "the engine's stream ended before its last chunk",
    midway: true,
  },
  {
    name: "an engine that answers stream: true with JSON",
    api: "vllm-completions",
    type: "application/json",
    body: () => JSON.stringify(vllmChunk("Hello", HELLO, "stop")),
    message: "not an event stream",
    midway: false,
  },
  {
    name: "a first chunk generated from other prompt tokens",
    api: "sglang-generate",
    body: (n) =>
      sse({
        text: "Hi",
        output_ids: [1],
        meta_info: {
          prompt_tokens: n + 1,
          completion_tokens: 1,
          finish_reason: null,
          output_token_logprobs: [[-1, 1, null]],
        },
      }),
    message: "prompt tokens, not the",
    midway: false,
  },
  {
    name: "SGLang's error chunk first",
    api: "sglang-generate",
    body: () => sse({ error: { message: "The input is too long" } }, "[DONE]"),
    message: "the engine failed the generation: The input is too long",
    midway: false,
  },
];

test("sglang-generate: the engine's weight_version of a streamed turn is in its record", async () => {
  const c = await core(cannedUrl, "sglang-generate");
  const id = await session(c);
  const ids = [...HELLO, folder.tokenId("<|im_end|>")!];
  const meta = (n: number, k: number, finish: unknown) => ({
    prompt_tokens: n,
    completion_tokens: k,
    weight_version: "step-7",
    finish_reason: finish,
    output_token_logprobs: ids.slice(0, k).map((t) => [-0.5, t, null]),
  });
  reply = (n) => ({
    body: sse(
      { text: "Hel", output_ids: ids.slice(0, 1), meta_info: meta(n, 1, null) },
      { text: "Hello", output_ids: ids, meta_info: meta(n, ids.length, { type: "stop", matched: ids.at(-1) }) },
      "[DONE]",
    ),
  });
  assert.ok((await text(await chat(c, id, true))).endsWith("data: [DONE]\n\n"));
  const record = (await got(c, id)).records[0] as unknown as { engine_weight_version?: string };
  assert.is(record.engine_weight_version, "step-7");
});

for (const fault of FAULTS)
  test(`${fault.api}: ${fault.name} is a 502 ${fault.midway ? "error event" : "before any event"}; nothing recorded`, async () => {
    const c = await core(cannedUrl, fault.api);
    const id = await session(c);
    reply = (n) => ({ type: fault.type, body: fault.body(n) });
    const res = await chat(c, id, true);
    const body = await text(res);
    if (fault.midway) {
      assert.is(res.status, 200);
      const last = JSON.parse(body.trimEnd().split("\n\n").at(-1)!.slice(6));
      assert.match(last.error.message, fault.message);
      assert.is(last.error.code, 502);
      assert.not.ok(body.includes("[DONE]"));
    } else {
      assert.is(res.status, 502);
      assert.match(JSON.parse(body).error, fault.message);
    }
    assert.is((await got(c, id)).records.length, 0);
  });

for (const api of ["sglang-generate", "vllm-completions"] as const)
  test(`${api}: streamed turns replay from the journal to the same session; the next turn continues it`, async () => {
    const dir = join(root, `replay-${api}`);
    const a = await core(cumulative.url, api, { dir });
    const id = await session(a);
    const first = await text(await chat(a, id, true));
    const callId = /"id":"(call_[^"]+)"/.exec(first)![1]!;
    const args = [...first.matchAll(/"arguments":"((?:[^"\\]|\\.)+)"/g)].map((m) => JSON.parse(`"${m[1]}"`)).join("");
    const reasoning = [...first.matchAll(/"reasoning_content":"((?:[^"\\]|\\.)*)"/g)]
      .map((m) => JSON.parse(`"${m[1]}"`))
      .join("");
    const messages = [
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: "",
        reasoning_content: reasoning,
        tool_calls: [{ id: callId, type: "function", function: { name: "get_weather", arguments: args } }],
      },
      { role: "tool", tool_call_id: callId, content: '{"temp_c": 21}' },
    ];
    assert.ok((await text(await chat(a, id, true, { messages }))).endsWith("data: [DONE]\n\n"));
    const before = await text(await a.get(id));
    assert.is((JSON.parse(before) as Got).records.length, 2, "the second turn continued the first (no rollback)");
    const b = await core(cumulative.url, api, { dir });
    await b.recover();
    assert.is(await text(await b.get(id)), before);
  });

for (const api of ["sglang-chat", "sglang-generate", "vllm-completions"] as const)
  test(`${api}: a commit that fails (journal write) ends the stream with an error event; the session is as it was`, async () => {
    const dir = join(root, api);
    const c = await core(cumulative.url, api, { dir });
    const id = await session(c);
    symlinkSync("/dev/full", join(dir, "00000002.tj")); // the segment the turn's entry goes to
    const res = await chat(c, id, true);
    assert.is(res.status, 200);
    const body = await text(res);
    const events = body.trimEnd().split("\n\n");
    assert.ok(events.length > 2, "the events came before the commit");
    const last = JSON.parse(events.at(-1)!.slice(6));
    assert.match(last.error.message, "journal write failed");
    assert.is(last.error.type, "TITO_ERR_JOURNAL_WRITE");
    assert.not.ok(body.includes("[DONE]"));
    assert.is((await got(c, id)).records.length, 0);
    assert.ok((await text(await chat(c, id, true))).endsWith("data: [DONE]\n\n"), "the same turn goes through");
    assert.is((await got(c, id)).records.length, 1);
  });

test.run();
