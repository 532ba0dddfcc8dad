// Flags of `npm run bench` (bench/rollout.ts): parsing, presets and validation in one
// place. A preset sets defaults; explicit flags always win over it.
import { benchArgs } from "./bench-args.ts";
import { existsSync } from "node:fs";
import { cpus } from "node:os";
import { join, resolve } from "node:path";
import { REPO_ROOT } from "./rollout-procs.ts";

export interface RolloutConfig {
  preset: string;
  sessions: number;
  turns: number;
  inputTokens: number;
  outputTokens: number;
  r3LastMiB: number;
  workers: number[];
  getRecords: boolean;
  latencyMs: number;
  repeat: number;
  /** Unmeasured passes of the workload before each measured run (JIT warm-up of every process). */
  warmup: number;
  /** Measured passes of the workload per run, one after another: CPU, latency and turns/s over all of them. */
  passes: number;
  out: string;
  serverFlags: string[];
  /** The server's --engine-api; the floor always sends the engine's chat route. */
  engineApi: string;
  verbose: boolean;
  /** Write a V8 CPU profile of every server process into this folder. */
  cpuProf?: string;
  /** Another checkout's server, run beside this one per worker count (labels base-wN): the same-hour "before". */
  baselineRoot?: string;
}

export const USAGE = `Usage: npm run bench -- [flags]

The rollout benchmark: the same multi-turn workload through tito-server for each worker
count, and straight to the simulated engine (the floor), in one run.

  --preset NAME        small (default): 8 sessions x 20 turns, no routing replay
                       r3: 8 sessions x 10 turns, routed_experts growing to 16 MiB, records GETs
                       reference: the shape of the reference project's overhead benchmark
                       (bench_session_server_overhead.py): 32 sessions x 50 turns, 64 / 64
                       tokens, routed_experts of the whole sequence at 1000 raw bytes per token
                       (~8.8 MiB of base64 on the last turn), no records GETs, workers 1,2,nproc
  --quick              a small configuration (about a minute): 4 x 8 turns, 4 MiB, records GETs
  --sessions N         concurrent sessions
  --turns T            chat turns per session (turn k sends 2k+1 messages)
  --input-tokens N     tokens of the first user message and of each appended tool message
  --output-tokens N    completion_tokens of every engine reply
  --r3-last-mib M      routed_experts (base64, as on the wire) growing linearly to M MiB on the last turn
  --workers LIST       worker counts to sweep, e.g. 1,2,4 (default 1,2; reference: 1,2,nproc)
  --get-records        each session GETs its full records after its last turn
  --no-get-records     no records GETs (r3 and quick have them by default): the turn path alone
  --latency-ms MS      simulated generation time per engine reply (default 0)
  --repeat R           run every configuration R times, each on a fresh server (default 1)
  --warmup P           unmeasured passes of the workload before each measured run
                       (default: 40 for small, 2 for r3, 1 for quick)
  --passes P           measured passes of the workload per run, one after another (default:
                       10 for small, 1 for r3 and quick); a small pass lasts ~0.15 s, less
                       than the time between two of a process's full GCs
  --engine-api API     the server's engine API: sglang-chat (default), sglang-generate or
                       vllm-completions (the simulated engine serves all three; the floor
                       always sends the engine's chat route)
  --server-flag FLAG   extra flag for tito-server serve (repeatable), e.g. --server-flag=--durability=memory
  --out FILE           JSON results (default bench/out/rollout.json); the SVG chart goes next to it
  --verbose            copy the children's stderr to this stderr
  --cpu-prof DIR       write a V8 .cpuprofile of every server process (host, router, workers) into DIR
  --baseline-root DIR  also run the server of another checkout (built: npm ci there) for each worker
                       count, interleaved with this one (runs base-wN), and print this code's
                       CPU per turn against it: the same-hour "before" of a change
  --help               this text`;

/**
 * The reference's overhead benchmark (radixark/miles tests/manual/session/
 * bench_session_server_overhead.py @ 31f1ca96, its defaults and the shape the issue quotes):
 * 32 sessions x 50 sequential turns, 64 new content tokens in and 64 out per turn, and each
 * reply's routed_experts covering the whole sequence so far at --r3-scale 1000 raw bytes
 * per token. Here turn 50's sequence is ~6,900 Qwen3 tokens (64 + 49 x (64 + 64 + the
 * template's ~10) + 64), so 6.9 MB raw, 8.8 MiB as base64; the simulated engine grows it
 * linearly by turn, as the sequence grows. Its mock answers at once (no generation time).
 */
const REFERENCE_R3_LAST_MIB = 8.8;

const PRESETS: Record<string, Partial<RolloutConfig>> = {
  small: {
    sessions: 8,
    turns: 20,
    inputTokens: 128,
    outputTokens: 128,
    r3LastMiB: 0,
    getRecords: false,
    warmup: 40,
    passes: 10,
  },
  r3: {
    sessions: 8,
    turns: 10,
    inputTokens: 128,
    outputTokens: 128,
    r3LastMiB: 16,
    getRecords: true,
    warmup: 2,
    passes: 1,
  },
  reference: {
    sessions: 32,
    turns: 50,
    inputTokens: 64,
    outputTokens: 64,
    r3LastMiB: REFERENCE_R3_LAST_MIB,
    getRecords: false,
    warmup: 1,
    passes: 1,
    workers: [...new Set([1, 2, cpus().length])],
  },
  quick: {
    sessions: 4,
    turns: 8,
    inputTokens: 128,
    outputTokens: 64,
    r3LastMiB: 4,
    getRecords: true,
    warmup: 1,
    passes: 1,
  },
};

function fail(message: string): never {
  process.stderr.write(`bench: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

function num(name: string, value: string | undefined, min: number, integer = true): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) {
    fail(`--${name} must be ${integer ? "an integer" : "a number"} >= ${min}, got ${JSON.stringify(value)}`);
  }
  return n;
}

export function parseRolloutArgs(argv: string[]): RolloutConfig {
  const values = benchArgs("bench", USAGE, argv, {
    preset: { type: "string" },
    quick: { type: "boolean" },
    sessions: { type: "string" },
    turns: { type: "string" },
    "input-tokens": { type: "string" },
    "output-tokens": { type: "string" },
    "r3-last-mib": { type: "string" },
    workers: { type: "string" },
    "get-records": { type: "boolean" },
    "no-get-records": { type: "boolean" },
    "latency-ms": { type: "string" },
    repeat: { type: "string" },
    warmup: { type: "string" },
    passes: { type: "string" },
    "server-flag": { type: "string", multiple: true },
    "engine-api": { type: "string" },
    out: { type: "string" },
    verbose: { type: "boolean" },
    "cpu-prof": { type: "string" },
    "baseline-root": { type: "string" },
  });
  const presetName = values.quick ? "quick" : (values.preset ?? "small");
  const preset = PRESETS[presetName];
  if (!preset) fail(`unknown --preset ${JSON.stringify(presetName)} (small, r3, reference)`);
  const workers = (values.workers ?? (preset.workers ?? [1, 2]).join(","))
    .split(",")
    .map((w) => num("workers", w.trim(), 1)!);
  if (new Set(workers).size !== workers.length) fail("--workers lists a count twice");
  if (values["get-records"] && values["no-get-records"]) fail("--get-records and --no-get-records together");
  return {
    preset: presetName,
    sessions: num("sessions", values.sessions, 1) ?? preset.sessions!,
    turns: num("turns", values.turns, 1) ?? preset.turns!,
    inputTokens: num("input-tokens", values["input-tokens"], 1) ?? preset.inputTokens!,
    outputTokens: num("output-tokens", values["output-tokens"], 1) ?? preset.outputTokens!,
    r3LastMiB: num("r3-last-mib", values["r3-last-mib"], 0, false) ?? preset.r3LastMiB!,
    workers,
    getRecords: values["no-get-records"] ? false : (values["get-records"] ?? preset.getRecords!),
    latencyMs: num("latency-ms", values["latency-ms"], 0) ?? 0,
    repeat: num("repeat", values.repeat, 1) ?? 1,
    warmup: num("warmup", values.warmup, 0) ?? preset.warmup!,
    passes: num("passes", values.passes, 1) ?? preset.passes!,
    out: values.out ?? join(REPO_ROOT, "bench", "out", "rollout.json"),
    serverFlags: values["server-flag"] ?? [],
    engineApi: values["engine-api"] ?? "sglang-chat",
    verbose: values.verbose ?? false,
    cpuProf: values["cpu-prof"],
    baselineRoot: values["baseline-root"] === undefined ? undefined : baselineRoot(values["baseline-root"]),
  };
}

/** The baseline checkout's absolute path, refused unless it has a built server (dist/). */
function baselineRoot(dir: string): string {
  const root = resolve(dir);
  if (!existsSync(join(root, "bin", "tito-server.js")))
    fail(`--baseline-root ${dir}: no bin/tito-server.js there (not a tito-server checkout?)`);
  if (!existsSync(join(root, "dist", "server", "host", "cli.js")))
    fail(`--baseline-root ${dir}: not built (run npm ci or npm run build there first)`);
  return root;
}

/** routed_experts bytes before base64 on the last turn: M MiB of base64 on the wire. */
export function r3LastRawBytes(config: RolloutConfig): number {
  return Math.floor((config.r3LastMiB * 1024 * 1024 * 3) / 4);
}

/** The engine's per-turn routed_experts (raw bytes), as engine-main.ts grows it. */
export function r3RawBytesOfTurn(config: RolloutConfig, turn: number): number {
  const last = r3LastRawBytes(config);
  return last > 0 ? Math.round((last * Math.min(turn + 1, config.turns)) / config.turns) : 0;
}

/** base64 bytes of routing replay one full session carries in its records. */
export function r3BytesPerSession(config: RolloutConfig): number {
  let total = 0;
  for (let k = 0; k < config.turns; k++) total += 4 * Math.ceil(r3RawBytesOfTurn(config, k) / 3);
  return total;
}
