// `npm run bench:memory`: worker memory per token held (issue 25). Starts the simulated
// engine and a `tito-server serve` child, warms every worker up, reads each worker's memory
// (GET /metrics?gc=1: a full GC in every worker before its reading), then runs N sessions
// x T turns with tool outputs of a given size and keeps them open, reads again, and
// divides each worker's growth by the token ids its sessions hold (the last turn's prompt
// + completion tokens). It also reads half-way (after half the sessions): the growth from
// there to the end per token added is the marginal cost, free of what the idle reading's
// malloc and V8 free lists happened to hold. Then it deletes the sessions and reads again. It prints a
// markdown table and writes JSON. Then the fork case (memory-fork.ts, issue 43): one
// session forked --fork-ways ways, then a turn per branch. It stops exactly the processes it started.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname, join, resolve } from "node:path";
import { request } from "undici";
import { killStartedOnExit, REPO_ROOT, startChild, startEngine, stopServer } from "./rollout-procs.ts";
import { openingMessage, Target, toolResult, warmUp } from "./rollout-workload.ts";
import { benchArgs } from "./bench-args.ts";
import { cpuMs } from "./rollout-proc-stats.ts";
import { forkCase } from "./memory-fork.ts";

const USAGE = `Usage: npm run bench:memory -- [flags]

Worker memory per token held: N sessions x T turns kept open, each worker's RSS and V8
heap growth over its idle reading (after a warm-up), divided by the token ids it holds.

  --sessions N         sessions, kept open until the reading (default 200)
  --turns T            chat turns per session; turn k > 0 appends one tool message (default 10)
  --tool-tokens N      tokens of the first user message and of each tool message (default 1500)
  --output-tokens N    completion tokens of every engine reply (default 32)
  --workers W          worker processes (default 2)
  --concurrency C      sessions running at once (default 32)
  --settle-ms MS       wait before each reading, so buffers pooled for a burst are let go
                       (they go after 2 s unused) (default 3000)
  --fork-ways N        the fork case: branches of one session (default 64; 0: no fork case)
  --fork-tokens N      the fork case: token ids of the forked session (default 32768)
  --server-root DIR    run the server of another checkout (a built export of a commit, to
                       measure "before"); the engine and this client stay this checkout's
  --server-flag FLAG   extra flag for tito-server serve (repeatable)
  --out FILE           JSON results (default bench/out/memory.json)
  --help               this text`;

interface Config {
  sessions: number;
  turns: number;
  toolTokens: number;
  outputTokens: number;
  workers: number;
  concurrency: number;
  settleMs: number;
  forkWays: number;
  forkTokens: number;
  serverRoot: string;
  serverFlags: string[];
  out: string;
}

function parse(argv: string[]): Config {
  const values = benchArgs("bench:memory", USAGE, argv, {
    sessions: { type: "string" },
    turns: { type: "string" },
    "tool-tokens": { type: "string" },
    "output-tokens": { type: "string" },
    workers: { type: "string" },
    concurrency: { type: "string" },
    "settle-ms": { type: "string" },
    "fork-ways": { type: "string" },
    "fork-tokens": { type: "string" },
    "server-root": { type: "string" },
    "server-flag": { type: "string", multiple: true },
    out: { type: "string" },
  });
  const num = (name: string, value: string | undefined, fallback: number): number => {
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1) {
      process.stderr.write(`bench: --${name} must be an integer >= 1, got ${JSON.stringify(value)}\n\n${USAGE}\n`);
      process.exit(2);
    }
    return n;
  };
  return {
    sessions: num("sessions", values.sessions, 200),
    turns: num("turns", values.turns, 10),
    toolTokens: num("tool-tokens", values["tool-tokens"], 1500),
    outputTokens: num("output-tokens", values["output-tokens"], 32),
    workers: num("workers", values.workers, 2),
    concurrency: num("concurrency", values.concurrency, 32),
    settleMs: num("settle-ms", values["settle-ms"], 3000),
    forkWays: values["fork-ways"] === "0" ? 0 : num("fork-ways", values["fork-ways"], 64),
    forkTokens: num("fork-tokens", values["fork-tokens"], 32768),
    serverRoot: resolve(values["server-root"] ?? REPO_ROOT),
    serverFlags: values["server-flag"] ?? [],
    out: values.out ?? join(REPO_ROOT, "bench", "out", "memory.json"),
  };
}

interface Memory {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  /** V8's code spaces (compiled code), part of heapUsed. */
  heapCode: number;
  /** Compiled code and bytecode with their metadata (nodejs_heap_compiled_bytes, both kinds), part of heapUsed; NaN from a server without it. */
  compiled: number;
  /** /proc/PID/status RssAnon: RSS without the mapped files (the node binary's code pages); Linux only. */
  rssAnon?: number;
}

function rssAnon(pid: number): number | undefined {
  try {
    const kb = /^RssAnon:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined; // not Linux
  }
}

const SERIES: Record<string, keyof Memory> = {
  process_resident_memory_bytes: "rss",
  nodejs_heap_size_used_bytes: "heapUsed",
  nodejs_heap_size_total_bytes: "heapTotal",
  nodejs_external_memory_bytes: "external",
  nodejs_heap_code_used_bytes: "heapCode",
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Each worker's memory after `settleMs` and a full GC in each (GET /metrics?gc=1), read
 * from a second GC a second after the first: V8 gives the pages a GC freed back to the OS
 * a moment after the GC returns, so an RSS read right after the first still counts them.
 */
async function readMemory(url: string, pids: number[], settleMs: number): Promise<Memory[]> {
  const workers = pids.length;
  await sleep(settleMs);
  await (await request(`${url}/metrics?gc=1`)).body.dump();
  await sleep(1000);
  const res = await request(`${url}/metrics?gc=1`);
  const body = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`GET /metrics?gc=1: status ${res.statusCode}`);
  const out = Array.from({ length: workers }, () => ({}) as Partial<Memory>);
  for (const line of body.split("\n")) {
    const m = /^(\w+)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]));
    const mem = out[Number(labels.shard)];
    if (mem === undefined) continue;
    if (m[1] === "nodejs_heap_compiled_bytes") mem.compiled = (mem.compiled ?? 0) + Number(m[3]);
    else if (SERIES[m[1]!] && Object.keys(labels).length === 1) mem[SERIES[m[1]!]!] = Number(m[3]);
  }
  out.forEach((mem, shard) => {
    // nodejs_heap_compiled_bytes may be missing (a --server-root from before it): no "held" then.
    mem.compiled ??= NaN;
    if (Object.values(SERIES).some((field) => mem[field] === undefined))
      throw new Error(`GET /metrics?gc=1 has no memory series for shard ${shard} (a server without them?)`);
    mem.rssAnon = rssAnon(pids[shard]!);
  });
  return out as Memory[];
}

interface Held {
  id: string;
  shard: number;
  tokens: number;
}

/** One session: create, T turns with a growing history; kept open. Resolves with its shard and tokens held. */
async function runSession(target: Target, config: Config, seed: number): Promise<Held> {
  const { id, shard } = await target.createOnShard();
  const messages: { role: string; content: string }[] = [openingMessage(seed, config.toolTokens)];
  let tokens = 0;
  for (let k = 0; k < config.turns; k++) {
    if (k > 0) messages.push(toolResult(seed, k, config.toolTokens));
    const body = JSON.stringify({ model: "tito-sim", messages, max_tokens: config.outputTokens });
    const res = await target.request("POST", target.chatPath(id), body);
    const reply = JSON.parse(Buffer.concat(res.chunks).toString("utf8"));
    if (res.status !== 200) throw new Error(`turn ${k} of session ${seed}: ${res.status} ${JSON.stringify(reply)}`);
    messages.push({ role: "assistant", content: reply.choices[0].message.content });
    // The session's ids after this turn: the prompt sent and the completion.
    tokens = reply.usage.prompt_tokens + reply.usage.completion_tokens;
  }
  return { id, shard, tokens };
}

/** Runs the sessions, at most `concurrency` at once (a bounded pool of runners). */
async function runAll(target: Target, config: Config, from: number, to: number): Promise<Held[]> {
  const done: Held[] = [];
  let next = from;
  const runner = async () => {
    while (next < to) {
      const seed = next++;
      done.push(await runSession(target, config, seed));
    }
  };
  await Promise.all(Array.from({ length: Math.min(config.concurrency, to - from) }, runner));
  return done;
}

const MiB = 1024 * 1024;
const fmt = (n: number, digits = 1) => n.toFixed(digits);

async function main(): Promise<void> {
  const config = parse(process.argv.slice(2));
  killStartedOnExit();
  const loadAtStart = loadavg();
  const engine = await startEngine([
    "--prebuilt-tokens",
    String(config.outputTokens),
    "--prebuilt-turns",
    String(config.turns),
  ]);
  const server = await startChild({
    name: `tito-server(w${config.workers})`,
    cwd: config.serverRoot,
    args: [
      join(config.serverRoot, "bin", "tito-server.js"),
      "serve",
      "--port",
      "0",
      "--workers",
      String(config.workers),
      "--engine",
      engine.url,
      "--log-level",
      "warn",
      ...config.serverFlags,
    ],
    ready: /^tito-server ready url=(\S+)/,
  });
  const tree = (await (await request(`${server.url}/supervision`)).body.json()) as {
    router: { pid: number };
    shards: { pid: number }[];
  };
  const childPids = [tree.router.pid, ...tree.shards.map((s) => s.pid)];
  const target = new Target("memory", server.url, { sessions: true, connections: config.concurrency + 2 });
  try {
    // Idle = warmed up: JIT code, the tokenizer's caches and the heap's working room for
    // `concurrency` turns at once are there before the idle reading, as they stay after it.
    process.stderr.write("bench: warming up\n");
    const shape = {
      sessions: Math.max(config.concurrency, 2 * config.workers),
      turns: config.turns,
      inputTokens: config.toolTokens,
      outputTokens: config.outputTokens,
      getRecords: false,
      r3BytesPerSession: 0,
    };
    await warmUp(target, shape, config.workers, 1);
    const pids = tree.shards.map((s) => s.pid);
    const idle = await readMemory(server.url, pids, config.settleMs);
    const t0 = Date.now();
    // The workers' CPU over the turns (not the readings' GCs): what a change of memory
    // layout or V8 heap setting costs per turn.
    const cpuAtStart = pids.map(cpuMs);
    let turnCpu = pids.map(() => 0);
    const half = Math.floor(config.sessions / 2);
    const firstHalf = await runAll(target, config, 0, half);
    turnCpu = pids.map((pid, i) => cpuMs(pid) - cpuAtStart[i]!);
    const halfway = await readMemory(server.url, pids, config.settleMs);
    const cpuAtHalf = pids.map(cpuMs);
    const sessions = [...firstHalf, ...(await runAll(target, config, half, config.sessions))];
    turnCpu = pids.map((pid, i) => turnCpu[i]! + cpuMs(pid) - cpuAtHalf[i]!);
    const loadMs = Date.now() - t0;
    const loadAtReading = loadavg();
    const held = await readMemory(server.url, pids, config.settleMs);
    for (const s of sessions) await target.delete(s.id);
    const afterDelete = await readMemory(server.url, pids, config.settleMs);

    const perWorker = held.map((mem, shard) => {
      const mine = sessions.filter((s) => s.shard === shard);
      const tokens = mine.reduce((n, s) => n + s.tokens, 0);
      const secondHalfTokens = tokens - firstHalf.filter((s) => s.shard === shard).reduce((n, s) => n + s.tokens, 0);
      const growth = {
        rss: mem.rss - idle[shard]!.rss,
        heapUsed: mem.heapUsed - idle[shard]!.heapUsed,
        heapTotal: mem.heapTotal - idle[shard]!.heapTotal,
        external: mem.external - idle[shard]!.external,
      };
      return {
        shard,
        sessions: mine.length,
        tokens,
        secondHalfTokens,
        idle: idle[shard]!,
        halfway: halfway[shard]!,
        held: mem,
        afterDelete: afterDelete[shard]!,
        growth,
        bytesPerToken: {
          rss: growth.rss / tokens,
          heapUsed: growth.heapUsed / tokens,
          heapPlusExternal: (growth.heapUsed + growth.external) / tokens,
          rssAnon: mem.rssAnon === undefined ? null : (mem.rssAnon - idle[shard]!.rssAnon!) / tokens,
          /** From the half-way reading to the end, per token the second half added. */
          marginalRss: (mem.rss - halfway[shard]!.rss) / secondHalfTokens,
          marginalHeap: (mem.heapUsed - halfway[shard]!.heapUsed) / secondHalfTokens,
        },
      };
    });
    const tokens = perWorker.reduce((n, w) => n + w.tokens, 0);
    const sum = (f: (w: (typeof perWorker)[number]) => number) => perWorker.reduce((n, w) => n + f(w), 0);
    const total = {
      tokens,
      rss: sum((w) => w.growth.rss) / tokens,
      heapUsed: sum((w) => w.growth.heapUsed) / tokens,
      heapPlusExternal: sum((w) => w.growth.heapUsed + w.growth.external) / tokens,
      rssAnon: sum((w) => (w.bytesPerToken.rssAnon ?? NaN) * w.tokens) / tokens,
      marginalRss: sum((w) => w.held.rss - w.halfway.rss) / sum((w) => w.secondHalfTokens),
    };
    const mib = (n: number) => fmt(n / MiB);
    const lines = [
      `#### Memory per token held — ${config.sessions} sessions x ${config.turns} turns, ${config.toolTokens}-token tool outputs, ${config.outputTokens}-token replies, ${config.workers} workers`,
      "",
      "| worker | sessions | tokens held | idle RSS MiB | RSS growth MiB | **RSS B/token** | RssAnon B/token | marginal RSS B/token | heap growth MiB | heap B/token | heap+external B/token | heap reserved growth MiB | RSS after delete MiB |",
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
      ...perWorker.map((w) =>
        [
          `shard-${w.shard}`,
          w.sessions,
          w.tokens,
          mib(w.idle.rss),
          mib(w.growth.rss),
          `**${fmt(w.bytesPerToken.rss)}**`,
          w.bytesPerToken.rssAnon === null ? "–" : fmt(w.bytesPerToken.rssAnon),
          fmt(w.bytesPerToken.marginalRss),
          mib(w.growth.heapUsed),
          fmt(w.bytesPerToken.heapUsed),
          fmt(w.bytesPerToken.heapPlusExternal),
          mib(w.growth.heapTotal),
          mib(w.afterDelete.rss),
        ].join(" | "),
      ),
      [
        "all",
        config.sessions,
        tokens,
        "",
        mib(sum((w) => w.growth.rss)),
        `**${fmt(total.rss)}**`,
        fmt(total.rssAnon),
        fmt(total.marginalRss),
        mib(sum((w) => w.growth.heapUsed)),
        fmt(total.heapUsed),
        fmt(total.heapPlusExternal),
        mib(sum((w) => w.growth.heapTotal)),
        "",
      ].join(" | "),
    ].map((row) => (row.startsWith("|") || row.startsWith("#") || row === "" ? row : `| ${row} |`));
    const fork =
      config.forkWays === 0
        ? undefined
        : await forkCase(
            target,
            {
              ways: config.forkWays,
              tokens: config.forkTokens,
              turns: config.turns,
              outputTokens: config.outputTokens,
            },
            async (shard) => (await readMemory(server.url, pids, config.settleMs))[shard]!,
          );
    if (fork)
      lines.push(
        "",
        `#### Fork case — 1 session x ${fork.baseTokens} tokens forked ${config.forkWays} ways, then +1 turn per branch (shard-${fork.shard})`,
        "",
        "| forks add, heap+external KiB | forks add, held KiB | unique tokens held | heap+external B/unique token | code spaces grew KiB | code+bytecode grew KiB | **held B/unique token** | RSS B/unique token |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        `| ${fmt(fork.forkHeapPlusExternal / 1024)} | ${fmt(fork.forkHeld / 1024)} | ${fork.uniqueTokens} | ${fmt(fork.heapPlusExternalPerUniqueToken)} | ${fmt(fork.codeGrowth / 1024)} | ${fmt(fork.compiledGrowth / 1024)} | **${fmt(fork.heldPerUniqueToken)}** | ${fmt(fork.rssPerUniqueToken)} |`,
        "",
        "held: heap + external less what compiled code and bytecode grew (V8 compiles a function's bytecode when it first runs and flushes it after a few GCs unused: 50-250 KiB either way, whatever the worker holds).",
      );
    const cpuPerTurn = turnCpu.reduce((a, b) => a + b, 0) / (config.sessions * config.turns);
    const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(" ");
    lines.push(
      "",
      `workers' CPU over the turns: ${fmt(cpuPerTurn, 2)} ms per turn (${turnCpu.map((ms) => fmt(ms / 1000, 1)).join(" + ")} s)`,
      `server: ${config.serverRoot}; ${(loadMs / 1000).toFixed(1)} s of turns; load average at start ${load(loadAtStart)}, at the reading ${load(loadAtReading)}`,
    );
    process.stdout.write(`${lines.join("\n")}\n`);
    mkdirSync(dirname(config.out), { recursive: true });
    writeFileSync(
      config.out,
      `${JSON.stringify({ config, date: new Date().toISOString(), loadAtStart, loadAtReading, total, cpuPerTurn, turnCpu, perWorker, fork }, null, 1)}\n`,
    );
    process.stdout.write(`results: ${config.out}\n`);
  } finally {
    await target.close();
    for (const problem of await stopServer(server, childPids)) process.stderr.write(`bench: warning: ${problem}\n`);
    await engine.stop();
  }
}

main().catch((err: Error) => {
  process.stderr.write(`\nbench: ${err.stack ?? err.message}\n`);
  process.exit(1);
});
