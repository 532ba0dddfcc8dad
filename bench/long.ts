// `npm run bench:long`: long sessions (issue 47). Sessions grow by ~2,000 characters of
// tool output per turn to 100k+ tokens of context, all in lockstep (every session does
// turn k, then every session does turn k+1), against a fresh `tito-server serve` per
// family and the simulated engine for that family's tokenizer. At each round's start it reads
// the router's and the workers' CPU from /proc (thread run time, not wall time): a round's
// CPU is what the server spent from its start to the next round's start, so the
// server's CPU per turn can be read against the context length the turn had. Every turn
// re-sends the whole history (the client API) and the engine gets the whole prompt as ids
// (the engine API): both are inherent; the question is whether the server's own work per
// turn grows with history. It prints a table per family and the ratio at 80k against 8k.
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { request } from "undici";
import { benchArgs } from "./bench-args.ts";
import { codeNote, gitState } from "./code-state.ts";
import { cpuDelta, cpuSnapshot, streamerPids } from "./rollout-proc-stats.ts";
import { cpuProfEnv, killStartedOnExit, REPO_ROOT, startChild, startServer, stopServer } from "./rollout-procs.ts";
import { openingMessage, replyMessage, Target, text } from "./rollout-workload.ts";
import { bundledQwen3Dir } from "../sessions/tokenizer-folder.ts";
import { remappedDeepseekDir } from "../test/helpers/deepseek-folder.ts";

const USAGE = `Usage: npm run bench:long -- [flags]

Long sessions: per-turn server CPU (router + workers, from /proc) by context length.

  --families LIST    families to run, of qwen3 and deepseekv32 (default qwen3,deepseekv32);
                     deepseekv32 renders the whole history each turn (increment "history")
  --sessions N       sessions growing in lockstep (default 1)
  --tokens N         grow each session to this many prompt tokens (default 100000)
  --chars N          characters of tool output appended per turn (default 2000)
  --output-tokens N  max_tokens of every turn (default 32)
  --workers N        workers of the server (default 1)
  --warmup T         turns of an unmeasured session first, for the JIT (default 40)
  --cpu-prof DIR     write a V8 .cpuprofile of every server process into DIR
  --out FILE         JSON results (default bench/out/long.json)
  --verbose          copy the children's stderr to this stderr
  --help             this text`;

const FAMILIES = ["qwen3", "deepseekv32"] as const;
type Family = (typeof FAMILIES)[number];

/** Context lengths the report reads the CPU at; a turn counts for the nearest within ±15%. */
const MARKS = [8_000, 16_000, 32_000, 48_000, 64_000, 80_000, 100_000];
/** How long the last round of a phase is left to settle before its CPU is read (no next round starts it). */
const GAP_AFTER_LAST_MS = 20;

interface Turn {
  round: number;
  /** "grow": the sessions growing to --tokens; "again": fresh sessions after them, to ~8k again. */
  phase: "grow" | "again";
  promptTokens: number;
  /** Server CPU (router + workers + records streamers) per turn of the round, ms. */
  serverCpuMs: number;
  perProcess: Record<string, number>;
  /** Client-side latency of the round's turns, mean, ms. */
  latencyMs: number;
  /**
   * The round's start and end on the monotonic clock, µs (process.hrtime, the clock V8's
   * CPU profiles stamp their samples with): a --cpu-prof profile's samples of chosen turns.
   */
  spanUs: [number, number];
}

const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

function fail(message: string): never {
  process.stderr.write(`bench:long: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

function int(name: string, value: string | undefined, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) fail(`--${name} must be an integer >= ${min}, got ${JSON.stringify(value)}`);
  return n;
}

function parse(argv: string[]) {
  const v = benchArgs("bench:long", USAGE, argv, {
    families: { type: "string" },
    sessions: { type: "string" },
    tokens: { type: "string" },
    chars: { type: "string" },
    "output-tokens": { type: "string" },
    workers: { type: "string" },
    warmup: { type: "string" },
    "cpu-prof": { type: "string" },
    out: { type: "string" },
    verbose: { type: "boolean" },
  });
  const families = (v.families ?? FAMILIES.join(",")).split(",").map((f) => f.trim());
  for (const f of families) if (!(FAMILIES as readonly string[]).includes(f)) fail(`unknown family ${f}`);
  return {
    families: families as Family[],
    sessions: int("sessions", v.sessions, 1),
    tokens: int("tokens", v.tokens, 100_000),
    chars: int("chars", v.chars, 2000),
    outputTokens: int("output-tokens", v["output-tokens"], 32),
    workers: int("workers", v.workers, 1),
    warmup: int("warmup", v.warmup, 40, 0),
    cpuProf: v["cpu-prof"],
    out: v.out ?? join(REPO_ROOT, "bench", "out", "long.json"),
    verbose: v.verbose ?? false,
  };
}
type Config = ReturnType<typeof parse>;

function tokenizerDir(family: Family): string {
  return family === "qwen3" ? bundledQwen3Dir() : remappedDeepseekDir("deepseek_v32");
}

/** ~`chars` characters of tool output: words of the rollout workload (one Qwen3 token each). */
function toolOutput(role: string, seed: number, k: number, chars: number): { role: string; content: string } {
  const words = text(Math.ceil(chars / 5), seed * 100_003 + k);
  return { role, content: `Result ${k}:\n${words.slice(0, chars)}` };
}

/**
 * The role the output comes back in: a tool message for qwen3; DeepSeek V3.2's encoder
 * refuses a tool result that answers no tool call (the simulated engine makes none), so
 * there it is a user message carrying the same text.
 */
const APPEND_ROLE: Record<Family, string> = { qwen3: "tool", deepseekv32: "user" };

class LongSession {
  readonly messages: { role: string; content: string }[];
  promptTokens = 0;
  constructor(
    readonly family: Family,
    readonly target: Target,
    readonly id: string,
    readonly seed: number,
  ) {
    this.messages = [openingMessage(seed, 64)];
  }

  async turn(k: number, config: Config): Promise<number> {
    if (k > 0) this.messages.push(toolOutput(APPEND_ROLE[this.family], this.seed, k, config.chars));
    const body = JSON.stringify({ model: "tito-sim", messages: this.messages, max_tokens: config.outputTokens });
    const t0 = performance.now();
    const res = await this.target.request("POST", this.target.chatPath(this.id), body);
    const ms = performance.now() - t0;
    const bytes = Buffer.concat(res.chunks);
    if (res.status !== 200) throw new Error(`turn ${k}: status ${res.status}: ${bytes.subarray(0, 400).toString()}`);
    const reply = replyMessage(res.chunks);
    const usage = JSON.parse(bytes.toString("utf8")).usage as { prompt_tokens: number };
    this.promptTokens = usage.prompt_tokens;
    this.messages.push({ role: "assistant", content: reply.content });
    return ms;
  }
}

async function serverPids(url: string): Promise<Record<string, number>> {
  const res = await request(`${url}/supervision`);
  const tree = (await res.body.json()) as { router: { pid: number }; shards: { index: number; pid: number }[] };
  const pids: Record<string, number> = { router: tree.router.pid };
  for (const shard of tree.shards) pids[`worker-${shard.index}`] = shard.pid;
  return pids;
}

async function runFamily(family: Family, config: Config, note: (s: string) => void): Promise<Turn[]> {
  const dir = tokenizerDir(family);
  const engine = await startChild({
    name: `sim-engine(${family})`,
    args: [
      "--import",
      "tsx",
      "server/sim-engine/engine-main.ts",
      "--port",
      "0",
      "--tokenizer",
      dir,
      "--tito-family",
      family,
      "--max-model-len",
      String(4 * config.tokens),
    ],
    ready: /^sim-engine ready url=(\S+)/,
    echoStderr: config.verbose,
    timeoutMs: 120_000,
  });
  const env = config.cpuProf ? cpuProfEnv(join(config.cpuProf, family)) : undefined;
  const flags = ["--tokenizer", dir, "--tito-family", family, "--durability", "journal"];
  const server = await startServer(config.workers, engine.url, flags, config.verbose, env);
  const pids = await serverPids(server.url);
  const target = new Target(family, server.url, { sessions: true, connections: config.sessions + 2 });
  const turns: Turn[] = [];
  try {
    if (config.warmup > 0) {
      note(`${family}: warm-up session, ${config.warmup} turns`);
      const warm = new LongSession(family, target, await target.create(), 999_999);
      for (let k = 0; k < config.warmup; k++) await warm.turn(k, config);
      await target.delete(warm.id);
    }
    const measured = { ...pids, ...streamerPids(pids) };
    await grow(family, target, config, config.tokens, "grow", measured, turns, note);
    // The machine's load drifts over a run of minutes, and CPU time per turn with it (caches,
    // the other hyperthread): fresh sessions grown to ~8k again after the long ones measure
    // the short end a second time, and the report's 8k pools both ends (each is shown too).
    await grow(family, target, config, MARKS[0]! * 1.15, "again", measured, turns, note);
  } finally {
    await target.close();
    const problems = await stopServer(server, Object.values(pids));
    for (const p of problems) note(`warning: ${p}`);
    await engine.stop();
  }
  return turns;
}

/** Sessions in lockstep from their first turn until they hold `tokens`, each round measured into `turns`. */
async function grow(
  family: Family,
  target: Target,
  config: Config,
  tokens: number,
  phase: Turn["phase"],
  measured: Record<string, number>,
  turns: Turn[],
  note: (s: string) => void,
): Promise<void> {
  const sessions: LongSession[] = [];
  const seed = phase === "grow" ? 1 : 10_001;
  for (let s = 0; s < config.sessions; s++)
    sessions.push(new LongSession(family, target, await target.create(), seed + s));
  // A round's CPU runs from its start to the next round's start, not to its last reply:
  // what a turn leaves the server to do after replying (a GC task the router's event loop
  // runs once idle, a deferred fsync) falls between two rounds, and timing alone decided
  // whether the next round's reading caught it. Each round now owns the gap after it.
  let open: { turn: Turn; cpu0: ReturnType<typeof cpuSnapshot> } | undefined;
  const close = (cpu1: ReturnType<typeof cpuSnapshot>) => {
    if (!open) return;
    const cpu = cpuDelta(open.cpu0, cpu1);
    open.turn.perProcess = Object.fromEntries(Object.entries(cpu).map(([n, v]) => [n, v / sessions.length]));
    open.turn.serverCpuMs = Object.values(open.turn.perProcess).reduce((a, b) => a + b, 0);
    turns.push(open.turn);
    if (open.turn.round % 20 === 0)
      note(
        `${family} (${phase}): turn ${open.turn.round}, ${Math.round(open.turn.promptTokens)} tokens, ${open.turn.serverCpuMs.toFixed(2)} ms`,
      );
    open = undefined;
  };
  for (let k = 0; sessions[0]!.promptTokens < tokens; k++) {
    const cpu0 = cpuSnapshot(measured);
    close(cpu0);
    const start = monotonicUs();
    const ms = await Promise.all(sessions.map((s) => s.turn(k, config)));
    const promptTokens = sessions.reduce((a, s) => a + s.promptTokens, 0) / sessions.length;
    const turn: Turn = {
      round: k,
      phase,
      promptTokens,
      serverCpuMs: 0,
      perProcess: {},
      latencyMs: ms.reduce((a, b) => a + b) / ms.length,
      spanUs: [start, monotonicUs()],
    };
    open = { turn, cpu0 };
  }
  // The last round has no next start: it gets a short fixed gap to settle before its reading.
  await new Promise((resolve) => setTimeout(resolve, GAP_AFTER_LAST_MS));
  close(cpuSnapshot(measured));
  for (const s of sessions) await target.delete(s.id);
}

interface Mark {
  tokens: number;
  /** Which turns: all near the mark, or only one phase's (the 8k ends shown apart). */
  of: "all" | Turn["phase"];
  turns: number;
  cpuMs: number;
  /** cpuMs split: the router (relays the body both ways, parses nothing) and the workers (and records streamers). */
  routerMs: number;
  workersMs: number;
  latencyMs: number;
}

/** Mean CPU and latency per turn of the turns within ±15% of each mark (median-free: GCs count at their rate). */
function marks(turns: Turn[]): Mark[] {
  const at = (mark: number, of: Mark["of"]): Mark[] => {
    const near = turns.filter(
      (t) => Math.abs(t.promptTokens - mark) <= mark * 0.15 && (of === "all" || t.phase === of),
    );
    if (near.length === 0) return [];
    const mean = (f: (t: Turn) => number) => near.reduce((a, t) => a + f(t), 0) / near.length;
    const routerMs = mean((t) => t.perProcess.router ?? 0);
    const cpuMs = mean((t) => t.serverCpuMs);
    return [
      {
        tokens: mark,
        of,
        turns: near.length,
        cpuMs,
        routerMs,
        workersMs: cpuMs - routerMs,
        latencyMs: mean((t) => t.latencyMs),
      },
    ];
  };
  return [...at(MARKS[0]!, "grow"), ...at(MARKS[0]!, "again"), ...MARKS.flatMap((mark) => at(mark, "all"))];
}

async function main(): Promise<void> {
  const config = parse(process.argv.slice(2));
  killStartedOnExit();
  const git = gitState();
  const load0 = loadavg();
  const note = (s: string) => process.stderr.write(`bench:long: ${s}\n`);
  const results: Record<
    string,
    { turns: Turn[]; marks: Mark[]; ratio80to8: number | null; ratio80toFresh8: number | null }
  > = {};
  for (const family of config.families) {
    const turns = await runFamily(family, config, note);
    const m = marks(turns);
    const at = (n: number) => m.find((x) => x.tokens === n && x.of === "all")?.cpuMs;
    const ratio = at(80_000) !== undefined && at(8_000) !== undefined ? at(80_000)! / at(8_000)! : null;
    // The fresh sessions' 8k alone: every code path of a turn compiled by then (V8 tiers a
    // once-a-turn function up late; its TurboFan jobs in the first session's turns were ~15%
    // of the worker's samples under perf), so the stricter reading of the same target.
    const fresh = m.find((x) => x.tokens === 8_000 && x.of === "again")?.cpuMs;
    const ratioFresh = at(80_000) !== undefined && fresh !== undefined ? at(80_000)! / fresh : null;
    results[family] = { turns, marks: m, ratio80to8: ratio, ratio80toFresh8: ratioFresh };
  }
  const load1 = loadavg();
  const lines = [
    `#### Long sessions — ${config.sessions} session(s) in lockstep, +${config.chars} characters of tool output per turn to ${config.tokens} tokens, ${config.workers} worker(s), max_tokens ${config.outputTokens}`,
    "",
    "| family | context tokens | turns | server CPU ms/turn | vs 8k | router ms | workers ms | latency ms/turn | vs 8k |",
    "|---|---|---|---|---|---|---|---|---|",
  ];
  for (const [family, r] of Object.entries(results)) {
    const base = r.marks.find((x) => x.tokens === 8_000 && x.of === "all");
    for (const m of r.marks)
      lines.push(
        `| ${family} | ~${m.tokens / 1000}k${m.of === "all" ? "" : m.of === "grow" ? " (first sessions)" : " (fresh sessions after them)"} | ${m.turns} | ${m.cpuMs.toFixed(2)} | ${base ? (m.cpuMs / base.cpuMs).toFixed(2) + "x" : "-"} | ${m.routerMs.toFixed(2)} | ${m.workersMs.toFixed(2)} | ${m.latencyMs.toFixed(1)} | ${base ? (m.latencyMs / base.latencyMs).toFixed(2) + "x" : "-"} |`,
      );
  }
  lines.push("", "| family | server CPU per turn at 80k vs 8k | target | met |", "|---|---|---|---|");
  const row = (what: string, ratio: number | null) =>
    `| ${what} | ${ratio === null ? "-" : ratio.toFixed(2) + "x"} | <= 1.2x | ${ratio !== null && ratio <= 1.2 ? "yes" : "NO"} |`;
  for (const [family, r] of Object.entries(results))
    lines.push(row(family, r.ratio80to8), row(`${family}, against the fresh sessions' 8k`, r.ratio80toFresh8));
  const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(" ");
  lines.push(
    "",
    `machine: node ${process.version}${codeNote(git)}, load average at start ${load(load0)}, at end ${load(load1)}`,
  );
  process.stdout.write(`${lines.join("\n")}\n`);
  mkdirSync(dirname(config.out), { recursive: true });
  writeFileSync(config.out, `${JSON.stringify({ config, git, loadavg: [load0, load1], results }, null, 1)}\n`);
  process.stdout.write(`results: ${config.out}\n`);
}

main().catch((err: Error) => {
  process.stderr.write(`\nbench:long: ${err.stack ?? err.message}\n`);
  process.exit(1);
});
