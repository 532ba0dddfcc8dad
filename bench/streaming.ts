// `npm run bench:stream` (issue 17's benchmark): what tito-server adds to a streamed turn
// (`stream: true`), against the engine streaming alone, per engine API. The simulated
// engine runs in this process at a fixed token rate (`--token-ms`); a server with one
// worker is started per API (embedding API: a router and a worker process). Each request
// is a first turn of a fresh session (a Qwen3 reasoning reply with a tool call, about 40
// tokens); the engine leg asks the engine for the same prompt ids with its own stream.
// Legs alternate request by request, so machine noise hits both alike.
// Reported per leg: time to the first event (TTFB), to the last chunk, and, through the
// server, to `data: [DONE]` (after the commit); the ratios to the engine alone; the lag of
// each event behind the engine chunk that caused it (the engine stamps each chunk as it
// sends it; at a fixed rate slower than the server's per-event cost, the latest chunk sent
// before an event arrived is the one that caused it), so the time added per event; and the
// same turns with the engine at full speed (no pacing).
// sglang-chat asks the engine without a stream: its first byte comes when the engine is done.
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname } from "node:path";
import { performance } from "node:perf_hooks";
import { startSessionServer, type SessionServer } from "../index.ts";
import { renderChat } from "../sessions/chat-template.ts";
import { bundledQwen3Dir, loadTokenizerFolder } from "../sessions/tokenizer-folder.ts";
import { startSimEngine, type SimEngine } from "../server/sim-engine/sim-engine.ts";
import { fmt, median } from "./rollout-stats.ts";
import { benchArgs } from "./bench-args.ts";

const USAGE = `Usage: npm run bench:stream -- [--token-ms MS] [--requests N] [--out FILE]

  --token-ms MS    the engine's time per token in the paced runs (default 10)
  --requests N     requests per leg and API (default 20)
  --out FILE       also write the results as JSON`;

type Api = "sglang-generate" | "vllm-completions" | "sglang-chat";
const APIS: Api[] = ["sglang-generate", "vllm-completions", "sglang-chat"];
const TOOLS = [
  {
    type: "function",
    function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
  },
];
const MESSAGES = [{ role: "user", content: "What is the weather in Paris?" }];

interface Timing {
  ttfb: number;
  last: number;
  done: number;
  events: number;
  /** Each event's lag behind the engine chunk sent last before it arrived, ms. */
  lags: number[];
}

/** When the engine sent each chunk of the stream in flight (performance.now()). */
let sent: number[] = [];

function lagOf(at: number): number | undefined {
  let k = sent.length - 1;
  while (k >= 0 && sent[k]! > at) k--;
  return k >= 0 ? at - sent[k]! : undefined;
}

async function timed(url: string, body: unknown): Promise<Timing> {
  sent = [];
  const lags: number[] = [];
  const start = performance.now();
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let ttfb = 0;
  let last = 0;
  let events = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    const at = performance.now();
    const now = at - start;
    text += decoder.decode(value, { stream: true });
    const complete = text.split("\n\n");
    text = complete.pop()!;
    for (const event of complete) {
      if (event === "data: [DONE]") continue;
      ttfb ||= now;
      last = now;
      events++;
      const lag = lagOf(at);
      if (lag !== undefined) lags.push(lag);
    }
  }
  return { ttfb, last, done: performance.now() - start, events, lags };
}

function engineLeg(api: Api, engine: SimEngine, ids: number[]): () => Promise<Timing> {
  switch (api) {
    case "sglang-generate":
      return () =>
        timed(`${engine.url}/generate`, {
          input_ids: ids,
          sampling_params: { max_new_tokens: null, skip_special_tokens: false },
          return_logprob: true,
          stream: true,
        });
    case "vllm-completions":
      return () =>
        timed(`${engine.url}/v1/completions`, {
          prompt: ids,
          max_tokens: null,
          logprobs: 0,
          return_token_ids: true,
          skip_special_tokens: false,
          stream: true,
        });
    case "sglang-chat":
      return () => timed(`${engine.url}/v1/chat/completions`, { input_ids: ids, tools: TOOLS, stream: true });
  }
}

function serverLeg(server: SessionServer): () => Promise<Timing> {
  return async () => {
    const created = (await (await fetch(`${server.url}/sessions`, { method: "POST" })).json()) as {
      session_id: string;
    };
    const url = `${server.url}/sessions/${created.session_id}/v1/chat/completions`;
    const timing = await timed(url, { model: "m", messages: MESSAGES, tools: TOOLS, stream: true });
    await fetch(`${server.url}/sessions/${created.session_id}`, { method: "DELETE" });
    return timing;
  };
}

interface Row {
  api: Api;
  tokenMs: number;
  engine: { ttfbMs: number; lastMs: number; events: number; lagMs: number };
  server: { ttfbMs: number; lastMs: number; doneMs: number; events: number; lagMs: number };
  ttfbRatio: number;
  lastRatio: number;
  /** Paced runs: the median time an event spends in the server (its lag through the server minus straight from the engine). */
  addedUsPerEvent?: number;
}

async function run(api: Api, tokenMs: number, requests: number): Promise<Row> {
  const folder = loadTokenizerFolder(bundledQwen3Dir());
  const onStreamChunk = () => void sent.push(performance.now());
  const engine = await startSimEngine({ tokenizerFolder: folder, reasoning: true, tokenMs, onStreamChunk });
  const server = await startSessionServer({ engineUrl: engine.url, engineApi: api, workers: 1, logLevel: "warn" });
  try {
    const ids = folder.encode(renderChat(folder, MESSAGES, { tools: TOOLS, addGenerationPrompt: true }));
    const legs = { engine: engineLeg(api, engine, ids), server: serverLeg(server) };
    for (let i = 0; i < 3; i++) await Promise.all([legs.engine(), legs.server()]); // warm-up
    const e: Timing[] = [];
    const s: Timing[] = [];
    for (let i = 0; i < requests; i++) {
      e.push(await legs.engine());
      s.push(await legs.server());
    }
    const pick = (ts: Timing[], key: "ttfb" | "last" | "done" | "events") => median(ts.map((t) => t[key]));
    const lag = (ts: Timing[]) => median(ts.flatMap((t) => t.lags));
    const row: Row = {
      api,
      tokenMs,
      engine: { ttfbMs: pick(e, "ttfb"), lastMs: pick(e, "last"), events: pick(e, "events"), lagMs: lag(e) },
      server: {
        ttfbMs: pick(s, "ttfb"),
        lastMs: pick(s, "last"),
        doneMs: pick(s, "done"),
        events: pick(s, "events"),
        lagMs: lag(s),
      },
      ttfbRatio: pick(s, "ttfb") / pick(e, "ttfb"),
      lastRatio: pick(s, "last") / pick(e, "last"),
    };
    // sglang-chat asks the engine without a stream: no chunk to be late behind.
    if (tokenMs > 0 && api !== "sglang-chat") row.addedUsPerEvent = (lag(s) - lag(e)) * 1000;
    return row;
  } finally {
    await server.shutdown();
    await engine.close();
  }
}

function parse(argv: string[]): { tokenMs: number; requests: number; out?: string } {
  const values = benchArgs("bench:stream", USAGE, argv, {
    "token-ms": { type: "string" },
    requests: { type: "string" },
    out: { type: "string" },
  });
  const int = (v: string | undefined, d: number) => (v === undefined ? d : Math.max(0, Math.floor(Number(v))));
  return { tokenMs: int(values["token-ms"], 10), requests: Math.max(1, int(values.requests, 20)), out: values.out };
}

const { tokenMs, requests, out } = parse(process.argv.slice(2));
const rows: Row[] = [];
for (const api of APIS) for (const ms of [tokenMs, 0]) rows.push(await run(api, ms, requests));
process.stdout.write(
  `\nstreamed first turns, median of ${requests} per leg (ms; ratio = through tito-server / engine alone)\n\n` +
    "| API | token ms | engine TTFB | tito TTFB | TTFB ratio | engine last | tito last | last ratio | tito [DONE] | events engine/tito | event lag engine/tito | added per event |\n" +
    "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
);
for (const r of rows)
  process.stdout.write(
    `| ${r.api} | ${r.tokenMs} | ${fmt(r.engine.ttfbMs, 2)} | ${fmt(r.server.ttfbMs, 2)} | ${fmt(r.ttfbRatio, 2)} | ` +
      `${fmt(r.engine.lastMs, 2)} | ${fmt(r.server.lastMs, 2)} | ${fmt(r.lastRatio, 2)} | ${fmt(r.server.doneMs, 2)} | ` +
      `${r.engine.events}/${r.server.events} | ${fmt(r.engine.lagMs, 2)}/${fmt(r.server.lagMs, 2)} | ` +
      `${r.addedUsPerEvent === undefined ? "" : `${fmt(r.addedUsPerEvent, 0)} µs`} |\n`,
  );
if (out) {
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(
    out,
    `${JSON.stringify({ tokenMs, requests, loadavg: loadavg(), node: process.version, rows }, null, 1)}\n`,
  );
}
