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

/** Start the CLI and wait for its ready line (or its exit, which rejects). */
export function startCli(args: string[], options: { env?: NodeJS.ProcessEnv } = {}): Promise<CliRun> {
  const proc = spawn(process.execPath, [BIN, "serve", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...options.env },
  });
  let stdout = "";
  let stderr = "";
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
      void exit.then(() => reject(new Error(`CLI exited before stderr matched ${pattern}: ${stderr}`)));
      check();
    });
  return new Promise((resolve, reject) => {
    proc.stdout!.on("data", (d) => {
      stdout += d;
      const line = stdout.split("\n").find((l) => l.startsWith("tito-server ready "));
      if (line) {
        const url = /url=(\S+)/.exec(line)![1];
        resolve({ proc, url, readyLine: line, stderr: () => stderr, waitForStderr, exit });
      }
    });
    void exit.then(({ code, signal }) =>
      reject(new Error(`CLI exited before ready (code ${code}, signal ${signal}): ${stderr}`)),
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
