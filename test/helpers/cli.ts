// Starting the real `tito-server serve` CLI as a child process in tests.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

export const BIN = fileURLToPath(new URL("../../bin/tito-server.js", import.meta.url));

export interface CliRun {
  proc: ChildProcess;
  url: string;
  readyLine: string;
  stderr: () => string;
  /** Resolves once stderr (so far or later) matches; rejects if the CLI exits first. */
  waitForStderr: (pattern: RegExp) => Promise<void>;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** A started CLI, before its ready line: its output so far, a wait on its stderr, its exit. */
export type SpawnedCli = Omit<CliRun, "url" | "readyLine"> & { stdout: () => string };

/** Start `tito-server serve ARGS` without waiting for anything. */
export function spawnCli(args: string[], options: { env?: NodeJS.ProcessEnv } = {}): SpawnedCli {
  const proc = spawn(process.execPath, [BIN, "serve", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...options.env },
  });
  let stdout = "";
  let stderr = "";
  proc.stdout!.on("data", (d) => (stdout += d));
  proc.stderr!.on("data", (d) => (stderr += d));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const waitForStderr = (pattern: RegExp) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!pattern.test(stderr)) return;
        proc.stderr!.off("data", check);
        resolve();
      };
      proc.stderr!.on("data", check);
      void exit.then(({ code, signal }) =>
        reject(new Error(`CLI exited (code ${code}, signal ${signal}) before stderr matched ${pattern}: ${stderr}`)),
      );
      check();
    });
  return { proc, stdout: () => stdout, stderr: () => stderr, waitForStderr, exit };
}

/** Start the CLI and wait for its ready line (or its exit, which rejects). */
export function startCli(args: string[], options: { env?: NodeJS.ProcessEnv } = {}): Promise<CliRun> {
  const cli = spawnCli(args, options);
  return new Promise((resolve, reject) => {
    const onData = () => {
      const line = cli
        .stdout()
        .split("\n")
        .find((l) => l.startsWith("tito-server ready "));
      if (!line) return;
      cli.proc.stdout!.off("data", onData);
      const url = /url=(\S+)/.exec(line)![1]!;
      resolve({ ...cli, url, readyLine: line });
    };
    cli.proc.stdout!.on("data", onData);
    void cli.exit.then(({ code, signal }) =>
      reject(new Error(`CLI exited before ready (code ${code}, signal ${signal}): ${cli.stderr()}`)),
    );
  });
}

/** Run the CLI to completion (for --help and bad flags). */
export function runCli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, [BIN, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  let stdout = "";
  let stderr = "";
  proc.stdout!.on("data", (d) => (stdout += d));
  proc.stderr!.on("data", (d) => (stderr += d));
  return new Promise((resolve) => proc.once("exit", (code) => resolve({ code, stdout, stderr })));
}
