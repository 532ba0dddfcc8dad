// The test runner behind `npm test` and `npm run test:fast`. A file that starts a process
// tree (test/fast-set.ts: the CLI, a SupervisionTree, startSessionServer, npm), and the heavy
// treeless ones (the long HTTP fuzz, the all-tokenizers family loop, the cross-check), runs
// in its own process, as Fastify runs its suites: a timer one leaks cannot hold the others,
// a crash fails only that file, and its processes are its own. The other files, the fast
// set, run in batches (test/batch.ts: one process per batch, as `uvu` alone runs a
// directory), so they share one Node start and each tokenizer load: their isolation traded
// for speed (about half their CPU); a failure names the batch and uvu's output names the
// file. One more process at once than the machine has cores: a file waits on sockets, child
// processes and timers a good part of its time. Each runs its TypeScript through
// test/loader/register.mjs (esbuild, cached on disk), not tsx's loader. Each process gets a
// time limit; one that crashes, hangs, or does not exit after its summary is a failure that
// names its file or batch. The last line is `N passed, N failed`, and the exit code is 1 on
// any failure.
//
//   node --import ./test/loader/register.mjs test/run.ts [--fast] [--times] [--jobs N]
//        [--timeout S] [--batches N | --isolated] [regex …]
//
// Each line shows its wall seconds and its CPU seconds (user + system, its own and its
// children's: test/cpu-at-exit.ts); on a shared machine CPU is the cost to compare. --times
// ends with a table of every file or batch, most CPU first. The summary says the load
// average at the end of the run.
//
// --timeout (or TITO_TEST_TIMEOUT_S) is each process's limit in seconds, default 600: the
// longest files (chaos, durability, the CLI) take minutes on a loaded 2-core machine.
//
// --fast runs the fast set alone (the edit loop). The fast set is dealt into 2 batches per
// job; --batches N sets the count, --isolated runs every file in its own process.
// Regexes filter test files by path (any one must match).
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg } from "node:os";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { inFastSet, plan } from "./fast-set.ts";
import { TS_LOADER } from "./helpers/ts-loader.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const testDir = join(root, "test");

interface Options {
  fast: boolean;
  times: boolean;
  jobs: number;
  timeoutMs: number;
  filters: RegExp[];
  /** How many processes the fast-set files are dealt into (0: one process per file). */
  batches: number;
  isolated: boolean;
}

function parseArgs(argv: string[]): Options {
  let jobs: number | undefined;
  const options: Options = {
    fast: false,
    times: false,
    jobs: availableParallelism(),
    timeoutMs: Number(process.env.TITO_TEST_TIMEOUT_S ?? 600) * 1000,
    filters: [],
    batches: 0,
    isolated: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--fast") options.fast = true;
    else if (arg === "--times") options.times = true;
    else if (arg === "--jobs") jobs = Math.max(1, Number(argv[++i]));
    else if (arg === "--timeout") options.timeoutMs = Number(argv[++i]) * 1000;
    else if (arg === "--batches") options.batches = Math.max(0, Number(argv[++i]));
    else if (arg === "--isolated") options.isolated = true;
    else options.filters.push(new RegExp(arg));
  }
  // A batch of fast files waits on sockets and child engines ~40% of its wall time (wall
  // 41 s, CPU 23 s), a process-tree file as much (the CLI's: wall 25 s, CPU 16 s): one more
  // job than cores keeps the cores busy (--fast 93 s -> 81 s; npm test 205 s -> 186 s on 2
  // cores, the same CPU seconds). --isolated keeps one per core.
  options.jobs = jobs ?? (options.isolated ? availableParallelism() : availableParallelism() + 1);
  if (![options.jobs, options.timeoutMs, options.batches].every(Number.isFinite))
    throw new Error("bad --jobs, --timeout or --batches");
  if (options.isolated) options.batches = 0;
  else if (options.batches === 0) options.batches = 2 * options.jobs;
  return options;
}

const rel = (path: string) => relative(root, path).split(sep).join("/");

function testFiles(): string[] {
  return readdirSync(testDir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".test.ts"))
    .map((e) => join(e.parentPath, e.name))
    .sort();
}

/**
 * Files that take longest go first, so the run does not end on one long file alone (two
 * jobs balance only if the long files start early). The order comes from the last run's
 * CPU seconds per file (COSTS, written after every run, not committed); a file it does not
 * know gets a guess from these patterns: process-tree suites first, then other server
 * suites, then the rest.
 */
const SLOW_GUESS: [RegExp, number][] = [
  [
    /server\/(chaos|http-fuzz|durability|cli|records-|reshard|fork-reshard|supervision|rollout|streaming)|crosscheck|sessions\/tokenizer-cache/,
    60,
  ],
  [/server\//, 10],
];
const guess = (file: string) => SLOW_GUESS.find(([r]) => r.test(file))?.[1] ?? 1;
const COSTS = join(root, ".test-costs.json");

function readCosts(): Record<string, number> {
  try {
    return JSON.parse(readFileSync(COSTS, "utf8")) as Record<string, number>;
  } catch {
    return {};
  }
}

interface Outcome {
  /** The file's path, or for a batch its count and paths. */
  file: string;
  /** Whether the process ran one file alone (only then is its CPU that file's cost). */
  alone: boolean;
  passed: number;
  failed: number;
  skipped: number;
  ms: number;
  /** User + system CPU seconds of the file's process and the children it waited for, if it said. */
  cpu?: number;
  /** Why the file failed as a whole (crash, hang, no summary), if it did. */
  problem?: string;
  output: string;
}

const SUMMARY = /Total:\s+(\d+)\s+Passed:\s+(\d+)\s+Skipped:\s+(\d+)/;
/** ANSI colour codes, should a child force colours (built from a string: no control character in a regex literal). */
const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g");
/** How long a file may take to exit after it printed its summary (its after-hooks are done by then). */
const EXIT_GRACE_MS = 10_000;

const running = new Set<ChildProcess>();

/** Preloaded into each file's process: prints its CPU seconds (with its children's) at exit. */
const CPU_AT_EXIT = pathToFileURL(join(testDir, "cpu-at-exit.ts")).href;
const CPU_LINE = /^TITO_CPU user=([\d.]+) sys=([\d.]+)\n?/m;

const BATCH = join(testDir, "batch.ts");

/**
 * The tokenizer cache (sessions/tokenizer-cache.ts) every process of the run shares: the
 * environment's TITO_TOKENIZER_CACHE if it names one, else node_modules/.cache/tito-test-tokenizers,
 * kept from run to run as the TypeScript loader's cache is (test/loader/), so a run neither
 * reads nor fills the user's cache. A tokenizer is built from its tokenizer.json once per
 * checkout (a file is named by what it was built from; the cache prunes itself), not once
 * per worker (~0.3-1.6 CPU s each), nor once per run: a run's first processes start
 * together and each built the bundled Qwen3 while none had written it yet.
 */
const tokenizerCache = process.env.TITO_TOKENIZER_CACHE ?? join(root, "node_modules", ".cache", "tito-test-tokenizers");

/** Runs one test file in its own process, or (more than one) a batch of them in one (test/batch.ts). */
function runFile(files: string[], timeoutMs: number): Promise<Outcome> {
  const started = Date.now();
  const entry = files.length === 1 ? files : [BATCH, ...files];
  const child = spawn(process.execPath, [...TS_LOADER, "--import", CPU_AT_EXIT, ...entry], {
    cwd: root,
    // Its own process group, so a timeout also ends the processes the file started.
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    // TITO_CHILD_ENTRIES=dist: a session server started from source runs dist/'s children,
    // not the .ts through tsx (about a CPU second less per child; `npm test` builds first).
    env: {
      TITO_CHILD_ENTRIES: "dist",
      ...process.env,
      TITO_TOKENIZER_CACHE: tokenizerCache,
      NODE_DISABLE_COLORS: "1",
    },
  });
  running.add(child);
  let output = "";
  let problem: string | undefined;
  let grace: NodeJS.Timeout | undefined;
  const kill = (why: string) => {
    problem ??= why;
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // already gone
    }
  };
  const limit = setTimeout(() => kill(`timed out after ${timeoutMs / 1000} s`), timeoutMs);
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    if (!grace && SUMMARY.test(output.replace(ANSI, ""))) {
      grace = setTimeout(
        () => kill(`did not exit ${EXIT_GRACE_MS / 1000} s after its summary (a leaked timer or handle)`),
        EXIT_GRACE_MS,
      );
    }
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  return new Promise((resolveOutcome) => {
    child.once("close", (code, signal) => {
      clearTimeout(limit);
      clearTimeout(grace);
      running.delete(child);
      const ms = Date.now() - started;
      const cpuLine = CPU_LINE.exec(output);
      const cpu = cpuLine ? Number(cpuLine[1]) + Number(cpuLine[2]) : undefined;
      output = output.replace(CPU_LINE, "");
      const summary = SUMMARY.exec(output.replace(ANSI, ""));
      const total = summary ? Number(summary[1]) : 0;
      const passed = summary ? Number(summary[2]) : 0;
      const skipped = summary ? Number(summary[3]) : 0;
      let failed = total - passed;
      if (!summary) problem ??= `no test summary (exit code ${code}, signal ${signal})`;
      else if (code !== 0 && !problem && failed === 0) problem = `exit code ${code}, signal ${signal}`;
      if (problem && failed === 0) failed = 1;
      const file = files.length === 1 ? rel(files[0]!) : `${files.length} files (${files.map(rel).join(" ")})`;
      resolveOutcome({ file, alone: files.length === 1, passed, failed, skipped, ms, cpu, problem, output });
    });
  });
}

async function main(): Promise<number> {
  const options = parseArgs(process.argv.slice(2));
  let files = testFiles().filter((f) => options.filters.length === 0 || options.filters.some((r) => r.test(rel(f))));
  if (options.fast) files = files.filter((f) => inFastSet(f, root));
  const costs = readCosts();
  const cost = (file: string) => costs[rel(file)] ?? guess(rel(file));
  files.sort((a, b) => cost(b) - cost(a));
  if (files.length === 0) {
    process.stdout.write("no test files matched\n0 passed, 1 failed\n");
    return 1;
  }
  const started = Date.now();
  const queue = plan(files, root, options.batches, cost);
  const outcomes: Outcome[] = [];
  const worker = async () => {
    for (let file = queue.shift(); file; file = queue.shift()) {
      const outcome = await runFile(file, options.timeoutMs);
      outcomes.push(outcome);
      const secs =
        (outcome.ms / 1000).toFixed(1) + (outcome.cpu === undefined ? "" : ` s, ${outcome.cpu.toFixed(1)} CPU`);
      if (outcome.failed === 0) {
        process.stdout.write(`ok   ${outcome.file} (${outcome.passed} tests, ${secs} s)\n`);
      } else {
        process.stdout.write(`\nFAIL ${outcome.file} (${secs} s): ${outcome.problem ?? `${outcome.failed} failed`}\n`);
        process.stdout.write(outcome.output.replace(/^/gm, "  | ") + "\n");
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.jobs, queue.length) }, worker));
  const passed = outcomes.reduce((n, o) => n + o.passed, 0);
  const failed = outcomes.reduce((n, o) => n + o.failed, 0);
  const skipped = outcomes.reduce((n, o) => n + o.skipped, 0);
  const bad = outcomes.filter((o) => o.failed > 0).map((o) => o.file);
  // A batch's cost is not its files': the costs are kept from files run alone only (a
  // fast-set file's from an --isolated run).
  for (const o of outcomes) if (o.alone) costs[o.file] = o.cpu ?? o.ms / 1000;
  writeFileSync(COSTS, JSON.stringify(costs, null, 1) + "\n");
  const cpu = outcomes.reduce((n, o) => n + (o.cpu ?? 0), 0);
  if (options.times) {
    process.stdout.write("\nper file, most CPU first (wall s, CPU s):\n");
    for (const o of [...outcomes].sort((a, b) => (b.cpu ?? 0) - (a.cpu ?? 0))) {
      process.stdout.write(
        `${(o.ms / 1000).toFixed(1).padStart(7)} ${(o.cpu ?? NaN).toFixed(1).padStart(7)}  ${o.file}\n`,
      );
    }
  }
  process.stdout.write(
    `\n${files.length} files in ${((Date.now() - started) / 1000).toFixed(1)} s, ${options.jobs} at once, ` +
      `${cpu.toFixed(1)} CPU s, load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")}` +
      (skipped ? `, ${skipped} skipped` : "") +
      (bad.length ? `\nfailed files: ${bad.join(", ")}` : "") +
      `\n${passed} passed, ${failed} failed\n`,
  );
  return failed > 0 ? 1 : 0;
}

const stopAll = () => {
  for (const child of running) {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // already gone
    }
  }
  process.exit(130);
};
process.once("SIGINT", stopAll);
process.once("SIGTERM", stopAll);

process.exitCode = await main();
