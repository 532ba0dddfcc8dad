// Benchmark (not a test): the session core's per-turn cost for engine replies carrying
// 0, 16 and 64 MiB of routed_experts, next to JSON.parse of the same body.
//  A. reply processing on a pre-built reply (64 KiB chunks, as undici delivers), timed directly: scanReply (validate + cut
//     R3) + Trajectory.commit + record append — the core's own per-turn work;
//  B. a whole chat turn through SessionCore against a local HTTP server that returns the
//     pre-built body, minus an undici request that reads the same reply (the transfer),
//     i.e. what the core adds on top of receiving the bytes (create/delete, prompt
//     build, request build, A). Noisy when other processes share the cores.
// Usage: npm run bench:core [-- --out results.json]
import { writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { Pool } from "undici";
import { createSessionCore } from "../sessions/index.ts";
import { createEngine } from "../engine/index.ts";
import { MemoryRecordStore } from "../sessions/journal/records.ts";
import { scanReply } from "../engine/reply-scan.ts";
import { bundledQwen3Dir, loadTokenizerFolder } from "../sessions/tokenizer-folder.ts";
import { Trajectory } from "../sessions/trajectory.ts";

const MiB = 1 << 20;
const SIZES = (process.env.SIZES ?? "0,16,64").split(",").map(Number);
const COMPLETION_TOKENS = 512;
const folder = loadTokenizerFolder(bundledQwen3Dir());
const messages = [{ role: "user", content: "Summarize the weather report." }];
const promptIds = folder.encode(`<|im_start|>user\n${messages[0]!.content}<|im_end|>\n<|im_start|>assistant\n`);

/** An SGLang-shaped reply whose routed_experts is a base64 string of `mib` MiB, built as bytes. */
function buildBody(mib: number): Buffer {
  const logprobs = Array.from({ length: COMPLETION_TOKENS }, (_, i) => [-(i % 7) / 10, 1000 + i]);
  const head = JSON.stringify({
    id: "bench",
    object: "chat.completion",
    model: "m",
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: folder.decode(logprobs.map((e) => e[1]!)) },
        finish_reason: "stop",
        meta_info: {
          prompt_tokens: promptIds.length,
          completion_tokens: COMPLETION_TOKENS,
          output_token_logprobs: logprobs,
        },
      },
    ],
    usage: { prompt_tokens: promptIds.length, completion_tokens: COMPLETION_TOKENS },
  });
  if (mib === 0) return Buffer.from(head);
  const cut = head.indexOf(',"output_token_logprobs"');
  const payload = Buffer.alloc(mib * MiB, "QUJD");
  return Buffer.concat([
    Buffer.from(head.slice(0, cut) + ',"routed_experts":"'),
    payload,
    Buffer.from('"' + head.slice(cut)),
  ]);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}
function timeIt(runs: number, fn: () => unknown): number {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    fn();
    times.push(performance.now() - t);
  }
  return median(times);
}
async function timeAsync(runs: number, fn: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  return median(times);
}

/** A: the core's own work on one reply. */
function processReply(body: Buffer[]): void {
  const store = new MemoryRecordStore();
  const t = new Trajectory("bench");
  void store.open(t.id);
  const scanned = scanReply(body);
  t.commit({ promptIds, completionIds: scanned.completionIds, messages: [...messages, scanned.message] }, 1);
  void store.append(t.id, {
    timestamp: Date.now() / 1000,
    method: "POST",
    path: "/v1/chat/completions",
    statusCode: 200,
    request: Buffer.from("{}"),
    response: body,
  });
  if (scanned.clientBody.length === 0) throw new Error("unreachable");
}

async function main() {
  const out = process.argv.indexOf("--out") > 0 ? process.argv[process.argv.indexOf("--out") + 1] : undefined;
  let current: Buffer = Buffer.alloc(0);
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json", "content-length": current.length });
      res.end(current);
    });
  });
  // Long idle keep-alive: the parse timings leave connections idle for seconds, and a
  // server closing one just as a POST reuses it is a reset no client retries.
  server.keepAliveTimeout = 120_000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const engine = createEngine({
    api: "sglang-chat",
    engineUrl: url,
    timeoutMs: 600_000,
    connectTimeoutMs: 10_000,
    routingReplay: false,
    indexerReplay: false,
    dropAuthorization: false,
    pooledReplies: false,
  });
  const core = createSessionCore({ engine, tokenizerFolder: folder });
  const pool = new Pool(url);
  const chatBody = Buffer.from(JSON.stringify({ model: "m", messages }));
  const rows: Record<string, number>[] = [];
  try {
    for (const mib of SIZES) {
      current = buildBody(mib);
      const runs = mib === 64 ? 5 : mib === 16 ? 7 : 50;
      // As undici delivers it: 64 KiB chunks, scanned in place.
      const chunks = Array.from({ length: Math.ceil(current.length / 65536) }, (_, i) =>
        current.subarray(i * 65536, (i + 1) * 65536),
      );
      const coreMs = timeIt(runs, () => processReply(chunks));
      const text = current.toString("utf8");
      const parseMs = timeIt(Math.min(runs, 5), () => JSON.parse(text));
      const decodeParseMs = timeIt(Math.min(runs, 5), () => JSON.parse(current.toString("utf8")));
      const transferMs = await timeAsync(runs, async () => {
        const res = await pool.request({ method: "POST", path: "/v1/chat/completions", body: chatBody });
        const chunks: Buffer[] = [];
        for await (const c of res.body) chunks.push(c as Buffer);
      });
      const turnMs = await timeAsync(runs, async () => {
        const id = JSON.parse(((await core.create()).body as Buffer).toString()).session_id;
        const r = await core.chat(id, {
          method: "POST",
          path: "/v1/chat/completions",
          query: "",
          headers: {},
          body: chatBody,
        });
        if (r.status !== 200) throw new Error(`chat failed: ${r.status}`);
        await core.delete(id);
      });
      rows.push({
        mib,
        bodyMiB: current.length / MiB,
        coreMs,
        parseMs,
        decodeParseMs,
        ratio: coreMs / parseMs,
        turnMs,
        transferMs,
        addedMs: turnMs - transferMs,
      });
    }
  } finally {
    await core.close();
    await pool.close();
    await new Promise<void>((r) => server.close(() => r()));
  }
  const f = (n: number, d = 2) => n.toFixed(d).padStart(9);
  console.log(
    "A = the core's own per-turn work, timed directly on a pre-built reply (64 KiB chunks, as received): scanReply + commit + record",
  );
  console.log(
    "B = a whole turn through SessionCore against a local engine, minus an undici request reading the same reply",
  );
  console.log(`median of runs; ${COMPLETION_TOKENS} completion tokens; Node ${process.version}`);
  console.log("");
  console.log(
    "| routed_experts MiB | body MiB | A core ms | JSON.parse ms | decode+parse ms | A / JSON.parse | B turn ms | transfer ms | B added ms |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|");
  for (const r of rows) {
    console.log(
      `| ${r.mib} | ${f(r.bodyMiB)} | ${f(r.coreMs, 3)} | ${f(r.parseMs)} | ${f(r.decodeParseMs)} | ${f(r.ratio, 4)} | ${f(r.turnMs)} | ${f(r.transferMs)} | ${f(r.addedMs)} |`,
    );
  }
  const at64 = rows.find((r) => r.mib === 64) ?? rows[rows.length - 1]!;
  console.log("");
  console.log(
    `target: at 64 MiB A < 1/5 of JSON.parse -> ${at64.ratio < 0.2 ? "met" : "NOT met"} (ratio ${at64.ratio.toFixed(4)})`,
  );
  if (out)
    writeFileSync(out, JSON.stringify({ node: process.version, completionTokens: COMPLETION_TOKENS, rows }, null, 2));
}

await main();
