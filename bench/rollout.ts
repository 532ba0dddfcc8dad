// `npm run bench`: the rollout benchmark (issue 7). Starts the simulated engine in its
// own process with pre-built replies, then runs the same workload straight to the engine
// (the floor) and through a fresh `tito-server serve` child for each worker count, and
// prints a markdown table, writes the JSON results and an SVG chart next to them.
// The bench process is only a client; it stops exactly the processes it started.
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname } from "node:path";
import { chartSvg } from "./rollout-chart.ts";
import { parseRolloutArgs, r3BytesPerSession, r3LastRawBytes, type RolloutConfig } from "./rollout-args.ts";
import { cpuProfEnv, killStartedOnExit, startEngine } from "./rollout-procs.ts";
import { codeNote, gitState } from "./code-state.ts";
import { machineCpu, stealShare } from "./rollout-proc-stats.ts";
import { Progress } from "./rollout-progress.ts";
import { describe, markdown, ratios, summarizeLabels, targets } from "./rollout-report.ts";
import { runFloor, runServer, type RunContext, type RunResult } from "./rollout-run.ts";
import type { WorkloadShape } from "./rollout-workload.ts";

function engineFlags(config: RolloutConfig): string[] {
  const flags = [
    "--prebuilt-tokens",
    String(config.outputTokens),
    "--prebuilt-turns",
    String(config.turns),
    "--latency-ms",
    String(config.latencyMs),
  ];
  const r3 = r3LastRawBytes(config);
  if (r3 > 0) flags.push("--prebuilt-r3-last-bytes", String(r3), "--always-routed-experts");
  return flags;
}

async function main(): Promise<void> {
  const config = parseRolloutArgs(process.argv.slice(2));
  killStartedOnExit();
  const shape: WorkloadShape = {
    sessions: config.sessions,
    turns: config.turns,
    inputTokens: config.inputTokens,
    outputTokens: config.outputTokens,
    getRecords: config.getRecords,
    r3BytesPerSession: r3BytesPerSession(config),
  };
  // A real deployment with routing replay asks the engine for it; the engine sends it anyway.
  const serverFlags = [
    ...(config.r3LastMiB > 0 ? ["--routing-replay"] : []),
    `--engine-api=${config.engineApi}`,
    ...config.serverFlags,
  ];
  const runsPerRepeat = 1 + config.workers.length * (config.baselineRoot ? 2 : 1);
  const progress = new Progress(config.repeat * runsPerRepeat * (config.sessions * config.passes + 1) * config.turns);
  progress.phase("starting the engine (pre-building replies)");
  const loadAtStart = loadavg();
  const cpuAtStart = machineCpu();
  const git = gitState(); // the code as it was when the servers started
  const engine = await startEngine(engineFlags(config), config.verbose);
  const runs: RunResult[] = [];
  const failures: { label: string; repeat: number; error: string }[] = [];
  try {
    for (let repeat = 1; repeat <= config.repeat; repeat++) {
      const ctx: RunContext = {
        engine,
        shape,
        repeat,
        warmup: config.warmup,
        passes: config.passes,
        serverFlags,
        verbose: config.verbose,
        serverEnv: config.cpuProf ? cpuProfEnv(config.cpuProf) : undefined,
        hooks: { onTurn: () => progress.tick() },
        note: (line) => {
          progress.phase(line);
          if (line.startsWith("warning")) process.stderr.write(`bench: ${line}\n`);
        },
      };
      // Interleaved (floor, [base-w1,] w1, [base-w2,] w2, … per repeat) so slow drift of a shared machine hits all alike.
      // With a baseline, even repeats run this checkout's server first: whichever of two
      // servers runs second came out 1.5-3 ms per r3 turn slower (docs/benchmark.md).
      // A failed run is reported and the others still run: one bad worker count must not hide the rest.
      type Attempt = [string, () => Promise<RunResult>];
      const attempts: Attempt[] = [
        ["floor", () => runFloor(ctx)],
        ...config.workers.flatMap((w): Attempt[] => {
          const mine: Attempt = [`w${w}`, () => runServer(w, ctx)];
          if (!config.baselineRoot) return [mine];
          const base: Attempt = [`base-w${w}`, () => runServer(w, ctx, config.baselineRoot)];
          return repeat % 2 === 1 ? [base, mine] : [mine, base];
        }),
      ];
      for (const [label, run] of attempts) {
        try {
          runs.push(await run());
        } catch (err) {
          failures.push({ label, repeat, error: (err as Error).message });
          process.stderr.write(`\nbench: run ${label} (repeat ${repeat}) failed: ${(err as Error).message}\n`);
        }
      }
    }
  } finally {
    progress.finish();
    await engine.stop();
  }

  if (runs.length === 0) throw new Error("every run failed");
  const labels = summarizeLabels(runs);

  const table = markdown(config, runs, labels);
  process.stdout.write(`${table}\n\n`);
  for (const f of failures)
    process.stdout.write(`FAILED: ${f.label} (repeat ${f.repeat}): ${f.error.split("\n")[0]}\n`);
  const machine = {
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? "?",
    date: new Date().toISOString(),
    // Other work on the machine inflates every latency; the load average says how much there was.
    loadavgAtStart: loadAtStart,
    loadavgAtEnd: loadavg(),
    // A virtual machine's neighbours take CPU time from all of it alike (steal).
    cpuSteal: stealShare(cpuAtStart),
    ...git,
  };
  const code = codeNote(git);
  const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(" ");
  process.stdout.write(
    `machine: ${machine.cpus} CPUs, node ${process.version}${code}, load average at start ${load(loadAtStart)}, at end ${load(machine.loadavgAtEnd)}, CPU steal ${machine.cpuSteal}\n`,
  );
  mkdirSync(dirname(config.out), { recursive: true });
  writeFileSync(
    config.out,
    `${JSON.stringify({ config, machine, summary: labels, ratios: ratios(config, labels), targets: targets(config, labels), failures, runs }, null, 1)}\n`,
  );
  const svgPath = config.out.replace(/\.json$/i, "") + ".svg";
  writeFileSync(
    svgPath,
    chartSvg(
      "tito-server rollout benchmark",
      `${describe(config)} — load average ${load(loadAtStart)} at start`,
      labels,
      runs,
    ),
  );
  process.stdout.write(`results: ${config.out}\nchart: ${svgPath}\n`);
  if (failures.length > 0) process.exitCode = 1;
}

main().catch((err: Error) => {
  process.stderr.write(`\nbench: ${err.stack ?? err.message}\n`);
  process.exit(1);
});
