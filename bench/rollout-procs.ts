// Child processes the benchmarks start: the simulated engine and the tito-server CLI.
// Owns spawning, waiting for a ready line on stdout, and stopping — by pid, only the
// processes this file started (plus the server's own children, named by its
// /supervision tree, if they outlive their host). It never kills anything by name and
// never signals a process group it did not create.
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";

export const REPO_ROOT = fileURLToPath(new URL("..", import.meta.url));

const STDERR_TAIL = 8 * 1024;
const live = new Set<Started>();

export interface Started {
  readonly name: string;
  readonly pid: number;
  readonly url: string;
  readonly readyLine: string;
  /** Milliseconds from spawn to the ready line. */
  readonly startupMs: number;
  /** Last bytes of the child's stderr (for error messages). */
  stderrTail(): string;
  /** SIGTERM, wait up to graceMs, then SIGKILL; resolves with the exit code/signal. */
  stop(graceMs?: number): Promise<{ code: number | null; signal: string | null }>;
}

export interface SpawnOptions {
  name: string;
  args: string[];
  /** The ready line; its first capture group is the URL. */
  ready: RegExp;
  timeoutMs?: number;
  /** Copy the child's stderr to ours as it comes (default: keep only a tail). */
  echoStderr?: boolean;
  /** Extra environment (e.g. NODE_OPTIONS=--cpu-prof, inherited by the server's children). */
  env?: Record<string, string>;
  /** The checkout to run in (default: this one); bench:memory measures another commit's server with it. */
  cwd?: string;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return true;
  const timer = new Promise<false>((resolve) => setTimeout(resolve, ms, false).unref());
  return Promise.race([once(child, "exit").then(() => true), timer]);
}

/** Starts `node <args>` in the repo root and resolves once the ready line appears. */
export async function startChild(options: SpawnOptions): Promise<Started> {
  const t0 = performance.now();
  const child = spawn(process.execPath, options.args, {
    cwd: options.cwd ?? REPO_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: options.env ? { ...process.env, ...options.env } : process.env,
  });
  if (child.pid === undefined) throw new Error(`${options.name}: spawn failed`);
  const pid = child.pid;
  let tail = "";
  child.stderr!.setEncoding("utf8");
  child.stderr!.on("data", (text: string) => {
    if (options.echoStderr) process.stderr.write(text);
    tail = (tail + text).slice(-STDERR_TAIL);
  });
  const lines = createInterface({ input: child.stdout! });
  let stopping: Promise<{ code: number | null; signal: string | null }> | undefined;
  const handle: Started = {
    name: options.name,
    pid,
    url: "",
    readyLine: "",
    startupMs: 0,
    stderrTail: () => tail,
    stop(graceMs = 10_000) {
      stopping ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGTERM");
          if (!(await waitExit(child, graceMs))) {
            process.stderr.write(`bench: ${options.name} (pid ${pid}) ignored SIGTERM for ${graceMs} ms: SIGKILL\n`);
            child.kill("SIGKILL");
            await waitExit(child, 5_000);
          }
        }
        live.delete(handle);
        return { code: child.exitCode, signal: child.signalCode };
      })();
      return stopping;
    },
  };
  live.add(handle);

  // Generous: on a 2-core machine shared with other work, 8 tokenizer loads can take a minute.
  const timeoutMs = options.timeoutMs ?? 300_000;
  try {
    const line = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ready line within ${timeoutMs} ms`)), timeoutMs);
      const onExit = (code: number | null, signal: string | null) =>
        reject(new Error(`exited before ready (code ${code}, signal ${signal})`));
      child.once("exit", onExit);
      lines.on("line", (text) => {
        if (!options.ready.test(text)) return;
        clearTimeout(timer);
        child.off("exit", onExit);
        resolve(text);
      });
    });
    // Keep draining stdout so the child never blocks on a full pipe.
    const url = options.ready.exec(line)?.[1] ?? "";
    Object.assign(handle, { readyLine: line, url, startupMs: performance.now() - t0 });
    return handle;
  } catch (err) {
    await handle.stop(2_000);
    throw new Error(`${options.name}: ${(err as Error).message}\n--- stderr tail ---\n${tail}`, { cause: err });
  }
}

/** The environment that makes a server's processes write V8 CPU profiles into `dir` (rollout-cpu-prof.mjs). */
export function cpuProfEnv(dir: string): Record<string, string> {
  return {
    NODE_OPTIONS:
      `${process.env.NODE_OPTIONS ?? ""} --import ${join(REPO_ROOT, "bench", "rollout-cpu-prof.mjs")}`.trim(),
    TITO_BENCH_CPU_PROF_DIR: resolve(dir),
  };
}

/**
 * The simulated engine: in pre-built mode (replies built before the ready line) when the
 * flags say `--prebuilt-tokens`, else `npm run engine`'s (bench:hop: any reply will do).
 */
export function startEngine(flags: string[], echoStderr = false): Promise<Started> {
  const main = flags.includes("--prebuilt-tokens")
    ? "bench/prebuilt-engine-main.ts"
    : "server/sim-engine/engine-main.ts";
  return startChild({
    name: "sim-engine",
    args: ["--import", "tsx", main, "--port", "0", ...flags],
    ready: /^sim-engine ready url=(\S+)/,
    echoStderr,
  });
}

/** `tito-server serve` as its own process tree (the bench stays a pure client). */
export function startServer(
  workers: number,
  engineUrl: string,
  extra: string[] = [],
  echoStderr = false,
  env?: Record<string, string>,
  /** The checkout whose server runs (--baseline-root); default this one. */
  root: string = REPO_ROOT,
): Promise<Started> {
  return startChild({
    env,
    cwd: root,
    name: `tito-server(w${workers})`,
    args: [
      join(root, "bin", "tito-server.js"),
      "serve",
      "--port",
      "0",
      "--workers",
      String(workers),
      "--engine",
      engineUrl,
      "--log-level",
      "warn",
      ...extra,
    ],
    ready: /^tito-server ready url=(\S+)/,
    echoStderr,
  });
}

/**
 * Stops the server and makes sure the children it reported (router, workers) are gone;
 * a child that outlives its host by 5 s is SIGKILLed by pid and reported.
 */
export async function stopServer(server: Started, childPids: number[]): Promise<string[]> {
  const result = await server.stop();
  const problems: string[] = [];
  if (result.code !== 0) problems.push(`${server.name} exited with code ${result.code} signal ${result.signal}`);
  const deadline = performance.now() + 5_000;
  let left = childPids.filter(isAlive);
  // Polling is the only way to learn that a non-child process exited.
  while (left.length > 0 && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    left = left.filter(isAlive);
  }
  for (const pid of left) {
    problems.push(`child pid ${pid} outlived ${server.name}: SIGKILL`);
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // exited meanwhile
    }
  }
  return problems;
}

/** On an unexpected exit of the bench itself, SIGKILL what it started (sync, by pid). */
export function killStartedOnExit(): void {
  const killAll = () => {
    for (const started of live) {
      try {
        process.kill(started.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  };
  process.once("exit", killAll);
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      process.stderr.write(`\nbench: ${signal}: stopping the processes it started\n`);
      void Promise.all([...live].map((s) => s.stop(2_000))).finally(() => process.exit(130));
    });
  }
}
