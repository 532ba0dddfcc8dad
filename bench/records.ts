// `npm run bench:records` (issue 6's benchmark): what the journal costs a turn, and what
// streaming records GETs cost everyone else.
// 1. Per-turn latency, journal (--fsync interval, and every) vs memory, at 0/16/64 MiB
//    engine replies (the size is the base64 routed_experts payload; the client copy is
//    small either way).
// 2. Head-of-line (issue 20): chat p99 of 4 concurrent small-chat loops on ONE worker,
//    alone and while 3 concurrent records GETs of a 256 MiB session stream (issue 47). The
//    GETs are read by curl processes (records-readers.ts), so this process's event loop only
//    times chats. The big session is written through one server, which then stops; a second
//    server on the same --data-dir replays it (so its engine can answer the chats with
//    small replies). Target: p99 under GETs at most 2x the p99 without. Each phase also
//    reports the CPU each process took (the benchmark process holds the timing client, the
//    simulated engine and the host), so a ratio can be read against who had the cores. The
//    worker's records streamer, the helper process that writes the GETs' bodies at a lower
//    CPU priority (--records-nice), is counted apart from the worker.
// Prints markdown tables and writes JSON (bench/out/records.json, or --out). It is a
// client only: everything it starts, it stops.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { startSessionServer, type SessionServer, type SessionServerOptions } from "../index.ts";
import { startSimEngine, type SimEngine } from "../server/sim-engine/sim-engine.ts";
import { bundledQwen3Dir, loadTokenizerFolder } from "../sessions/tokenizer-folder.ts";
import { cpuDelta, cpuSnapshot, peakRssMiB, streamerPids, type CpuSnapshot } from "./rollout-proc-stats.ts";
import { fmt, fmtRatio, summarize, type LatencySummary } from "./rollout-stats.ts";
import { benchArgs } from "./bench-args.ts";
import { codeNote, gitState } from "./code-state.ts";
import { CurlReaders } from "./records-readers.ts";

const USAGE = `Usage: npm run bench:records -- [--quick] [--gets-only] [--data-dir DIR] [--reader-nice N] [--records-nice N] [--out FILE]

  --quick          fewer turns and a ~64 MiB big session (a few minutes)
  --gets-only      only the head-of-line part (chat latency under records GETs)
  --data-dir DIR   where the journals go (default: a fresh temporary directory); each run
                   makes and removes its own subdirectory there
  --reader-nice N  run the records reader process at nice N (0-19; default 0): a reader that
                   only gets idle CPU stands in for a trainer on another machine, and
                   tells the server's share of the head-of-line from the reader's
  --records-nice N the server's --records-nice (0-19; default: the server's, 10): the
                   CPU priority of the worker's records streamer
  --out FILE       JSON results (default bench/out/records.json)`;

const args = benchArgs("bench:records", USAGE, process.argv.slice(2), {
  quick: { type: "boolean" },
  "gets-only": { type: "boolean" },
  out: { type: "string" },
  "data-dir": { type: "string" },
  "reader-nice": { type: "string" },
  "records-nice": { type: "string" },
});
const QUICK = args.quick === true;
/** A nice value flag (0-19), or `fallback` when absent; a bad one exits 2. */
function niceArg(flag: "reader-nice" | "records-nice", fallback: number | undefined): number | undefined {
  const value = args[flag];
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) > 19) {
    process.stderr.write(`bench:records: --${flag} must be an integer from 0 to 19, got ${value}\n`);
    process.exit(2);
  }
  return Number(value);
}
const READER_NICE = niceArg("reader-nice", 0)!;
const RECORDS_NICE = niceArg("records-nice", undefined);
const MiB = 1024 * 1024;
const SIZES = [0, 16, 64]; // reply MiB (base64 payload)
const TURNS: Record<number, number> = QUICK ? { 0: 20, 16: 4, 64: 3 } : { 0: 60, 16: 10, 64: 5 };
const BIG_REPLY_MIB = 64;
// x 64 MiB replies (48 MiB of routed experts each): a 256 MiB (268 MB) session, issue 47's
// "~270 MiB" (~64 MiB with --quick).
const BIG_TURNS = QUICK ? 1 : 4;
const GETS = 3; // concurrent records GETs of the big session
const CHAT_LOOPS = 4;
// Per round, over all loops. A p99 is about the 1% slowest samples: 1600 samples per phase
// make it the 16th slowest, where 320 made it the 4th, which one hiccup could move.
const CHAT_TURNS = QUICK ? 100 : 400;
const ROUNDS = 4; // alone, with GETs, alone, with GETs, ...: machine noise hits both phases alike
const folder = loadTokenizerFolder(bundledQwen3Dir());
const dataRoot = mkdtempSync(join(args["data-dir"] ?? tmpdir(), "tito-bench-records-"));

const stderr = (line: string) => process.stderr.write(`${line}\n`);

/** The two bodies this client reads: `POST /sessions`, and a chat reply for its message. */
interface SessionCreated {
  session_id: string;
}
interface ChatReply {
  choices: Array<{ message: unknown }>;
}

async function post<Body>(url: string, body?: unknown): Promise<Body> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`POST ${url}: ${res.status} ${text.slice(0, 200)}`);
  return JSON.parse(text) as Body;
}

async function engineFor(replyMiB: number): Promise<SimEngine> {
  // base64 is 4/3 of the raw bytes: ask for 3/4 of the reply size.
  return startSimEngine({
    tokenizerFolder: folder,
    routedExpertsBytes: Math.round((replyMiB * MiB * 3) / 4),
    alwaysRoutedExperts: replyMiB > 0,
  });
}

async function server(options: SessionServerOptions): Promise<SessionServer> {
  return startSessionServer({
    allowedAppendRoles: ["tool", "user"],
    logLevel: "warn",
    recordsNice: RECORDS_NICE,
    ...options,
  });
}

/** Sequential turns of one growing conversation on each server, interleaved turn by turn so noise hits both; the first (warm-up) is not timed. */
async function timedTurns(bases: string[], turns: number): Promise<number[][]> {
  const ids = await Promise.all(bases.map(async (base) => (await post<SessionCreated>(`${base}/sessions`)).session_id));
  const histories = bases.map(() => [{ role: "system", content: "You are terse." }] as unknown[]);
  const times = bases.map(() => [] as number[]);
  for (let k = 0; k <= turns; k++) {
    for (const [i, base] of bases.entries()) {
      const messages = histories[i]!;
      messages.push({ role: "user", content: `question ${k}` });
      const t = performance.now();
      const reply = await post<ChatReply>(`${base}/sessions/${ids[i]}/v1/chat/completions`, { model: "m", messages });
      if (k > 0) times[i]!.push(performance.now() - t);
      messages.push(reply.choices[0].message);
    }
  }
  await Promise.all(bases.map((base, i) => fetch(`${base}/sessions/${ids[i]}`, { method: "DELETE" })));
  return times;
}

interface TurnRow {
  replyMiB: number;
  memory: LatencySummary;
  journal: LatencySummary;
  /** The journal with --fsync every (a disk flush before each acknowledgement). */
  journalEvery: LatencySummary;
  overheadP50Ms: number;
}

async function perTurnOverhead(): Promise<TurnRow[]> {
  const rows: TurnRow[] = [];
  for (const replyMiB of SIZES) {
    const engine = await engineFor(replyMiB);
    const memory = await server({ engineUrl: engine.url, workers: 1, durability: "memory" });
    const journal = await server({
      engineUrl: engine.url,
      workers: 1,
      durability: "journal",
      dataDir: join(dataRoot, `turns-${replyMiB}`),
    });
    const every = await server({
      engineUrl: engine.url,
      workers: 1,
      durability: "journal",
      fsync: "every",
      dataDir: join(dataRoot, `turns-every-${replyMiB}`),
    });
    try {
      const [m, j, e] = (await timedTurns([memory.url, journal.url, every.url], TURNS[replyMiB]!)).map(summarize);
      rows.push({ replyMiB, memory: m!, journal: j!, journalEvery: e!, overheadP50Ms: j!.p50 - m!.p50 });
      stderr(
        `turns ${replyMiB} MiB: memory p50 ${fmt(m!.p50)} ms, journal p50 ${fmt(j!.p50)} ms, journal fsync every p50 ${fmt(e!.p50)} ms`,
      );
    } finally {
      await memory.shutdown();
      await journal.shutdown();
      await every.shutdown();
      await engine.close();
    }
  }
  return rows;
}

/** Loops of small chats (a fresh session every 6 turns) until `total` turns are timed. */
async function chatLoad(base: string, total: number): Promise<number[]> {
  const times: number[] = [];
  let left = total;
  const loop = async (n: number) => {
    while (left > 0) {
      const { session_id: id } = await post<SessionCreated>(`${base}/sessions`);
      const messages: unknown[] = [{ role: "system", content: "You are terse." }];
      for (let k = 0; k < 6 && left > 0; k++, left--) {
        messages.push({ role: "user", content: `loop ${n} question ${k}` });
        const t = performance.now();
        const reply = await post<ChatReply>(`${base}/sessions/${id}/v1/chat/completions`, { model: "m", messages });
        times.push(performance.now() - t);
        messages.push(reply.choices[0].message);
      }
      await fetch(`${base}/sessions/${id}`, { method: "DELETE" });
    }
  };
  await Promise.all(Array.from({ length: CHAT_LOOPS }, (_, n) => loop(n)));
  return times;
}

/** Chat load while `urls` stream to curl readers; the clock starts once they all flow. */
async function chatWhileReading(
  base: string,
  urls: string[],
  cpu: PhaseCpu,
  worker: number,
): Promise<{ times: number[]; bytes: number; gets: number; seconds: number }> {
  const readers = await CurlReaders.start(urls, READER_NICE);
  try {
    // The worker's records streamer, as it runs now: one that sat idle through the phase
    // before (recordsIdleMs) has exited, and the GETs started another.
    const streamer = streamerPids({ "worker-0": worker })["streamer-0"];
    const extra = { reader: readers.pid, ...(streamer === undefined ? {} : { streamer }) };
    const t = performance.now();
    const times = await cpu.measure(extra, () => chatLoad(base, CHAT_TURNS));
    const seconds = (performance.now() - t) / 1000;
    const done = await readers.stop();
    cpu.add("reader", done.cpuMs);
    return { times, bytes: done.bytes, gets: done.gets, seconds };
  } finally {
    readers.kill();
  }
}

/**
 * The CPU each process took over the timed part of one kind of phase, summed over its
 * rounds: `bench` is this process (timing client, simulated engine and host), then the
 * router, the worker and, under GETs, the records reader.
 */
class PhaseCpu {
  readonly #pids: Record<string, number>;
  readonly #ms: Record<string, number> = {};
  #wallMs = 0;

  constructor(pids: Record<string, number>) {
    this.#pids = pids;
  }

  async measure<T>(extra: Record<string, number>, run: () => Promise<T>): Promise<T> {
    const pids = { ...this.#pids, ...extra };
    const before: CpuSnapshot = cpuSnapshot(pids);
    const t = performance.now();
    const result = await run();
    const spent = cpuDelta(before, cpuSnapshot(pids));
    this.#wallMs += performance.now() - t;
    for (const [name, ms] of Object.entries(spent)) this.#ms[name] = (this.#ms[name] ?? 0) + ms;
    return result;
  }

  /** CPU ms a process took over a timed part, counted by someone else (the curl readers). */
  add(name: string, ms: number): void {
    this.#ms[name] = (this.#ms[name] ?? 0) + ms;
  }

  get seconds(): number {
    return this.#wallMs / 1000;
  }

  /** Each process's CPU as a share of one core (%), and their sum. */
  shares(): Record<string, number> {
    const shares = Object.fromEntries(Object.entries(this.#ms).map(([name, ms]) => [name, (100 * ms) / this.#wallMs]));
    return { ...shares, all: Object.values(shares).reduce((a, b) => a + b, 0) };
  }
}

interface GetLoadRow {
  sessionMiB: number[];
  replayMs: number;
  alone: LatencySummary;
  underGets: LatencySummary;
  /** CPU per process over each phase, % of one core (this machine has os.availableParallelism() cores). */
  cpuAlone: Record<string, number>;
  cpuUnderGets: Record<string, number>;
  /** Chat turns per second over each phase (four closed loops). */
  turnsPerSAlone: number;
  turnsPerSUnderGets: number;
  readerNice: number;
  /** The server's --records-nice; null: its default. */
  recordsNice: number | null;
  p99Ratio: number;
  getMiBps: number;
  getsCompleted: number;
  workerPeakRssMiB: number[];
}

async function chatUnderGets(): Promise<GetLoadRow> {
  const dataDir = join(dataRoot, "gets");
  const big = await engineFor(BIG_REPLY_MIB);
  const writer = await server({ engineUrl: big.url, workers: 1, dataDir });
  const ids: string[] = [];
  try {
    ids.push((await post<SessionCreated>(`${writer.url}/sessions`)).session_id);
    await Promise.all(ids.map((id) => bigSession(writer.url, id)));
  } finally {
    await writer.shutdown();
    await big.close();
  }
  const small = await engineFor(0);
  const started = performance.now();
  const s = await server({ engineUrl: small.url, workers: 1, dataDir });
  const replayMs = performance.now() - started;
  try {
    const sessionMiB: number[] = [];
    for (const id of ids) {
      const res = await fetch(`${s.url}/sessions/${id}`);
      let bytes = 0;
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) bytes += chunk.byteLength;
      sessionMiB.push(bytes / MiB);
    }
    await chatLoad(s.url, 20); // warm the worker
    const urls = Array.from({ length: GETS }, () => `${s.url}/sessions/${ids[0]}`);
    const tree = s.tree();
    const worker = tree.shards[0]!.pid!;
    const pids = { bench: process.pid, router: tree.router.pid!, worker };
    const cpuAlone = new PhaseCpu(pids);
    const cpuUnderGets = new PhaseCpu(pids);
    const aloneTimes: number[] = [];
    const loadedTimes: number[] = [];
    let bytes = 0;
    let gets = 0;
    for (let round = 0; round < ROUNDS; round++) {
      aloneTimes.push(...(await cpuAlone.measure({}, () => chatLoad(s.url, CHAT_TURNS))));
      const loaded = await chatWhileReading(s.url, urls, cpuUnderGets, worker);
      loadedTimes.push(...loaded.times);
      [bytes, gets] = [bytes + loaded.bytes, gets + loaded.gets];
      stderr(
        `round ${round + 1}: chat alone p99 ${fmt(summarize(aloneTimes).p99)} ms, under GETs p99 ${fmt(summarize(loadedTimes).p99)} ms, ${fmt(loaded.bytes / MiB / loaded.seconds)} MiB/s of records`,
      );
    }
    const alone = summarize(aloneTimes);
    const underGets = summarize(loadedTimes);
    const workerPeakRssMiB = s.tree().shards.map((shard) => peakRssMiB(shard.pid!));
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    const streamerMetrics = metrics.split("\n").filter((l) => l.startsWith("tito_worker_records_stream"));
    stderr(`records streamer: ${streamerMetrics.join("; ")}`);
    return {
      sessionMiB,
      replayMs,
      alone,
      underGets,
      cpuAlone: cpuAlone.shares(),
      cpuUnderGets: cpuUnderGets.shares(),
      turnsPerSAlone: alone.count / cpuAlone.seconds,
      turnsPerSUnderGets: underGets.count / cpuUnderGets.seconds,
      readerNice: READER_NICE,
      recordsNice: RECORDS_NICE ?? null,
      p99Ratio: underGets.p99 / alone.p99,
      getMiBps: bytes / MiB / cpuUnderGets.seconds,
      getsCompleted: gets,
      workerPeakRssMiB,
    };
  } finally {
    await s.shutdown();
    await small.close();
  }
}

async function bigSession(base: string, id: string): Promise<void> {
  const messages: unknown[] = [{ role: "system", content: "You are terse." }];
  for (let k = 0; k < BIG_TURNS; k++) {
    messages.push({ role: "user", content: `big question ${k}` });
    const reply = await post<ChatReply>(`${base}/sessions/${id}/v1/chat/completions`, { model: "m", messages });
    messages.push(reply.choices[0].message);
  }
}

function cpuCell(shares: Record<string, number>): string {
  return ["bench", "router", "worker", "streamer", "reader", "all"]
    .map((name) => (shares[name] === undefined ? "-" : `${fmt(shares[name], 0)}%`))
    .join(" · ");
}

function report(turns: TurnRow[], gets: GetLoadRow): string {
  const perTurn = [
    "### Per-turn latency, journal vs memory (1 worker each, one growing conversation per server, turns interleaved, ms)",
    "",
    "| reply | turns | memory p50 | journal p50 | overhead p50 | memory p99 | journal p99 | journal --fsync every p50 |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ...turns.map(
      (r) =>
        `| ${r.replyMiB} MiB | ${r.journal.count} | ${fmt(r.memory.p50, 2)} | ${fmt(r.journal.p50, 2)} | ${fmt(r.overheadP50Ms, 2)} | ${fmt(r.memory.p99, 2)} | ${fmt(r.journal.p99, 2)} | ${fmt(r.journalEvery.p50, 2)} |`,
    ),
    "",
  ];
  const lines = [
    ...(turns.length > 0 ? perTurn : []),
    `### Head-of-line: chat latency with ${GETS} concurrent records GETs (1 worker; a session of ${gets.sessionMiB.map((m) => fmt(m, 0)).join(" and ")} MiB fetched ${GETS} times at once, over and over, by ${GETS} curl processes${gets.readerNice > 0 ? ` at nice ${gets.readerNice}` : ""}; the worker's records streamer at ${gets.recordsNice === null ? "the server's default nice" : `nice ${gets.recordsNice}`})`,
    "",
    `CPU per process is % of one core over the phase (${availableParallelism()} cores); bench = timing client + simulated engine + host.`,
    "",
    "| phase | turns | turns/s | p50 ms | p95 ms | p99 ms | max ms | CPU: bench · router · worker · streamer · reader · all |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    `| chat alone | ${gets.alone.count} | ${fmt(gets.turnsPerSAlone, 0)} | ${fmt(gets.alone.p50, 2)} | ${fmt(gets.alone.p95, 2)} | ${fmt(gets.alone.p99, 2)} | ${fmt(gets.alone.max, 2)} | ${cpuCell(gets.cpuAlone)} |`,
    `| chat + ${GETS} GETs | ${gets.underGets.count} | ${fmt(gets.turnsPerSUnderGets, 0)} | ${fmt(gets.underGets.p50, 2)} | ${fmt(gets.underGets.p95, 2)} | ${fmt(gets.underGets.p99, 2)} | ${fmt(gets.underGets.max, 2)} | ${cpuCell(gets.cpuUnderGets)} |`,
    "",
    `p99 ratio (target <= 2x): ${fmtRatio(gets.p99Ratio)}; records streamed meanwhile: ${fmt(gets.getMiBps, 0)} MiB/s (${gets.getsCompleted} whole GETs); ` +
      `start with replay of the session: ${fmt(gets.replayMs, 0)} ms; worker peak RSS: ${gets.workerPeakRssMiB.map((m) => `${fmt(m, 0)} MiB`).join(", ")}`,
  ];
  return lines.join("\n");
}

async function main() {
  const git = gitState(); // the code as it was when the servers started
  const loadAtStart = loadavg();
  try {
    const turns = args["gets-only"] === true ? [] : await perTurnOverhead();
    const gets = await chatUnderGets();
    process.stdout.write(`${report(turns, gets)}\n`);
    const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(" ");
    const machine = {
      cpus: availableParallelism(),
      node: process.version,
      loadavgAtStart: loadAtStart,
      loadavgAtEnd: loadavg(),
      ...git,
    };
    process.stdout.write(
      `machine: ${machine.cpus} CPUs, node ${machine.node}${codeNote(git)}, load average at start ${load(loadAtStart)}, at end ${load(machine.loadavgAtEnd)}\n`,
    );
    const out = args.out ?? "bench/out/records.json";
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, JSON.stringify({ quick: QUICK, machine, turns, gets }, null, 2));
  } finally {
    rmSync(dataRoot, { recursive: true, force: true });
  }
}

await main();
