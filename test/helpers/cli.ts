// Starting the real `tito-server serve` CLI as a child process in tests, and running its
// main() in the test process for what needs no process (flag parsing, help, usage errors).
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { main } from "../../server/host/cli.ts";

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

/**
 * The CLI's main(ARGV) in this process, its stdout and stderr captured: for arguments that
 * end before anything starts (help, a bad flag or value, an unknown command).
 */
export async function runMain(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const out = process.stdout.write;
  const err = process.stderr.write;
  process.stdout.write = ((chunk: string | Uint8Array) => ((stdout += String(chunk)), true)) as typeof out;
  process.stderr.write = ((chunk: string | Uint8Array) => ((stderr += String(chunk)), true)) as typeof err;
  try {
    const code = await main(args);
    return { code, stdout, stderr };
  } finally {
    process.stdout.write = out;
    process.stderr.write = err;
  }
}
