// `npm run bench:core-turns` (issue 20): the session core's own CPU per small turn, with
// no router, channel or worker process around it, at several numbers of concurrent
// sessions, for this checkout and (--baseline-root) another one, run by run in the same
// hour. It splits the rollout benchmark's "server CPU per small turn" into the part the
// session core does (render, tokenize, build the engine request, scan the reply, commit,
// journal) and the part the process hops cost, which this does not run.
// Each measurement is a child process that loads one checkout's session core (its TS
// sources, through tsx), drives the small preset's turns (same texts as `npm run bench`)
// against one simulated engine, and reports its own CPU over the measured passes. The
// child is also the client (it builds each request and reads each reply), the same work
// for both checkouts. It is a client only: it stops exactly the processes it started.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { benchArgs } from "./bench-args.ts";
import { killStartedOnExit, REPO_ROOT, startEngine } from "./rollout-procs.ts";
import { machineCpu, stealShare } from "./rollout-proc-stats.ts";
import { fmtRatio, median } from "./rollout-stats.ts";
import { openingMessage, toolResult } from "./rollout-workload.ts";

const USAGE = `Usage: npm run bench:core-turns -- [--sessions 1,8,32] [--passes N] [--repeat N] [--baseline-root DIR] [--out FILE]

The session core's CPU per small turn (the small preset's chat: 128-token texts, a tool
result and an assistant reply more each turn, 20 turns per session; journal durability,
fsync interval), in process, against the simulated engine.
  --sessions LIST      concurrent sessions per measurement (default 1,8,32)
  --passes N           measured passes of all sessions, after 3 unmeasured (default: 160 turns / sessions, at least 2)
  --repeat N           measurements per sessions count and checkout, interleaved (default 3)
  --baseline-root DIR  also measure another checkout's session core (its sources and node_modules)
  --out FILE           JSON results (default bench/out/core-turns.json)`;

const TURNS = 20;
const TOKENS = 128;
const WARMUP_PASSES = 3;

interface Measured {
  root: string;
  sessions: number;
  turns: number;
  cpuUsPerTurn: number;
  sysUsPerTurn: number;
}

// ---- the child: one checkout's session core, measured from inside ------------------

async function child(root: string, engineUrl: string, sessions: number, passes: number): Promise<void> {
  const load = (path: string) => import(pathToFileURL(join(root, path)).href);
  const { createSessionCore } = await load("sessions/index.ts");
  const { createEngine } = await load("engine/index.ts");
  const { JournalRecordStore } = await load("sessions/journal/journal-store.ts");
  const dir = mkdtempSync(join(tmpdir(), "tito-core-turns-"));
  try {
    const recordStore = await JournalRecordStore.open({ dir, fsync: "interval" });
    const engine = createEngine({ api: "sglang-chat", engineUrl, timeoutMs: 60_000, connectTimeoutMs: 5_000 });
    const core = createSessionCore({ engine, recordStore });
    const pass = (seedBase: number) =>
      Promise.all(Array.from({ length: sessions }, (_, i) => session(core, seedBase + i)));
    for (let p = 0; p < WARMUP_PASSES; p++) await pass(p * 1000);
    const before = process.cpuUsage();
    for (let p = 0; p < passes; p++) await pass((WARMUP_PASSES + p) * 1000);
    const used = process.cpuUsage(before);
    const turns = passes * sessions * TURNS;
    const result: Measured = {
      root,
      sessions,
      turns,
      cpuUsPerTurn: (used.user + used.system) / turns,
      sysUsPerTurn: used.system / turns,
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
    await core.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

type Core = {
  create(): Promise<{ status: number; body: unknown }>;
  chat(id: string, req: unknown): Promise<{ status: number; body: unknown }>;
  delete(id: string): Promise<unknown>;
};

const bodyText = (body: unknown) =>
  (Array.isArray(body) ? Buffer.concat(body as Buffer[]) : (body as Buffer)).toString("utf8");

/** One session of the small preset: create, 20 turns with a growing history, delete. */
async function session(core: Core, seed: number): Promise<void> {
  const created = await core.create();
  if (created.status !== 200) throw new Error(`create: status ${created.status}`);
  const id = JSON.parse(bodyText(created.body)).session_id as string;
  const messages: { role: string; content: unknown }[] = [openingMessage(seed, TOKENS)];
  for (let k = 0; k < TURNS; k++) {
    if (k > 0) messages.push(toolResult(seed, k, TOKENS));
    const body = Buffer.from(JSON.stringify({ model: "tito-sim", messages, max_tokens: TOKENS }));
    const res = await core.chat(id, { method: "POST", path: "/v1/chat/completions", query: "", headers: {}, body });
    if (res.status !== 200) throw new Error(`turn ${k}: status ${res.status}: ${bodyText(res.body).slice(0, 300)}`);
    // As `npm run bench` sends it back: the assistant's text only.
    messages.push({ role: "assistant", content: JSON.parse(bodyText(res.body)).choices[0].message.content });
  }
  await core.delete(id);
}

// ---- the parent: engine, interleaved children, table ------------------------------

/** The measuring child now running: SIGKILLed by pid if the bench itself exits first. */
let running: number | undefined;
process.once("exit", () => {
  if (running === undefined) return;
  try {
    process.kill(running, "SIGKILL");
  } catch {
    // already gone
  }
});

function runChild(root: string, engineUrl: string, sessions: number, passes: number): Promise<Measured> {
  const args = ["--import", "tsx", join(REPO_ROOT, "bench", "core-turns.ts"), "child", root, engineUrl];
  const proc = spawn(process.execPath, [...args, String(sessions), String(passes)], {
    cwd: REPO_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  running = proc.pid;
  let out = "";
  let err = "";
  proc.stdout.on("data", (d) => (out += d));
  proc.stderr.on("data", (d) => (err += d));
  return new Promise((resolvePromise, reject) => {
    proc.on("error", reject);
    proc.on("close", (code) => {
      running = undefined;
      const line = out.trim().split("\n").pop() ?? "";
      if (code === 0 && line.startsWith("{")) resolvePromise(JSON.parse(line) as Measured);
      else reject(new Error(`core-turns child (${root}, ${sessions} sessions) exited ${code}: ${err.slice(-2000)}`));
    });
  });
}

function parse(argv: string[]) {
  const values = benchArgs("bench:core-turns", USAGE, argv, {
    sessions: { type: "string" },
    passes: { type: "string" },
    repeat: { type: "string" },
    "baseline-root": { type: "string" },
    out: { type: "string" },
  });
  const fail = (message: string): never => {
    process.stderr.write(`bench:core-turns: ${message}\n\n${USAGE}\n`);
    process.exit(2);
  };
  const sessions = (values.sessions ?? "1,8,32").split(",").map(Number);
  if (!sessions.every((s) => Number.isInteger(s) && s >= 1)) fail("--sessions must list integers >= 1");
  const passes = values.passes === undefined ? undefined : Number(values.passes);
  if (passes !== undefined && !(Number.isInteger(passes) && passes >= 1)) fail("--passes must be an integer >= 1");
  const repeat = Number(values.repeat ?? 3);
  if (!(Number.isInteger(repeat) && repeat >= 1)) fail("--repeat must be an integer >= 1");
  const baseline = values["baseline-root"] === undefined ? undefined : resolve(values["baseline-root"]);
  if (baseline !== undefined && !existsSync(join(baseline, "sessions", "index.ts")))
    fail(`--baseline-root ${baseline}: no sessions/index.ts there (not a tito-server checkout?)`);
  return { sessions, passes, repeat, baseline, out: values.out ?? join(REPO_ROOT, "bench", "out", "core-turns.json") };
}

async function main(): Promise<void> {
  const config = parse(process.argv.slice(2));
  const roots = config.baseline ? [REPO_ROOT, config.baseline] : [REPO_ROOT];
  const loadStart = loadavg();
  const cpuAtStart = machineCpu();
  // The pre-built engine (bench/prebuilt-engine-main.ts) needs its reply length and turn count.
  const engine = await startEngine(["--prebuilt-tokens", String(TOKENS), "--prebuilt-turns", String(TURNS)]);
  killStartedOnExit();
  const results: Measured[] = [];
  try {
    for (const sessions of config.sessions) {
      const passes = config.passes ?? Math.max(2, Math.round(160 / sessions));
      for (let r = 0; r < config.repeat; r++)
        for (const root of roots) {
          const m = await runChild(root, engine.url, sessions, passes);
          process.stderr.write(
            `bench:core-turns: ${root === REPO_ROOT ? "this" : "baseline"} ${sessions} sessions: ${m.cpuUsPerTurn.toFixed(0)} µs/turn\n`,
          );
          results.push(m);
        }
    }
  } finally {
    await engine.stop();
  }
  const of = (root: string, sessions: number) =>
    median(results.filter((m) => m.root === root && m.sessions === sessions).map((m) => m.cpuUsPerTurn));
  const lines = [
    `### Session core per small turn, in process (medians of ${config.repeat}), µs CPU`,
    "",
    config.baseline ? "| sessions | this checkout | baseline | this / baseline |" : "| sessions | this checkout |",
    config.baseline ? "|---|---|---|---|" : "|---|---|",
  ];
  for (const sessions of config.sessions) {
    const mine = of(REPO_ROOT, sessions);
    if (!config.baseline) lines.push(`| ${sessions} | ${mine.toFixed(0)} |`);
    else {
      const base = of(config.baseline, sessions);
      lines.push(`| ${sessions} | ${mine.toFixed(0)} | ${base.toFixed(0)} | ${fmtRatio(mine / base)} |`);
    }
  }
  const loadEnd = loadavg();
  const steal = stealShare(cpuAtStart);
  lines.push(
    "",
    `baseline: ${config.baseline ?? "none"}; load average at start ${loadStart.map((l) => l.toFixed(2)).join(" ")}, at end ${loadEnd.map((l) => l.toFixed(2)).join(" ")}, CPU steal ${steal} (${process.version})`,
  );
  process.stdout.write(`${lines.join("\n")}\n`);
  mkdirSync(dirname(config.out), { recursive: true });
  writeFileSync(
    config.out,
    JSON.stringify({ baseline: config.baseline, loadStart, loadEnd, cpuSteal: steal, results }, null, 2),
  );
}

if (process.argv[2] === "child") {
  const [, , , root, engineUrl, sessions, passes] = process.argv;
  await child(root!, engineUrl!, Number(sessions), Number(passes));
  process.exit(0);
} else {
  await main();
}
