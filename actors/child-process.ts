// Spawning and stopping one of our own entry points as a child process. The child
// speaks to its owner over the IPC channel (control-messages.ts); its stdout and
// stderr go to the host's stderr, so the CLI's stdout carries only its ready line.
// A child exits on its own when the IPC channel closes (see child-runtime.ts).
import { fork, type ChildProcess } from "node:child_process";
import { createRequire } from "node:module";
import type { Socket } from "node:net";
import { pathToFileURL } from "node:url";
import type { ChildToHost } from "./control-messages.ts";

const require = createRequire(import.meta.url);
/** tsx's ESM loader, by absolute URL so a child starts the same from any cwd; only .ts entries need it. */
const tsxLoader = () => pathToFileURL(require.resolve("tsx")).href;

export interface ChildSpec {
  /** Actor name: "router" or "shard-3". */
  name: string;
  /** Absolute path of the entry point: a .js file (plain node), or a .ts file run through tsx. */
  entry: string;
  /** Passed to the child as JSON in TITO_CHILD_CONFIG; `epoch` is added per spawn. */
  config: Record<string, unknown>;
  /** Node flags the child's own code relies on: always passed, after the tuning flags below. */
  nodeFlags?: string[];
}

/**
 * glibc malloc tuning for the children (the caller's environment wins). Bodies move as
 * 64 KiB–1 MiB buffers; by default glibc serves each from a fresh mmap and returns it on
 * free, so every chunk page-faults anew (far slower than reusing freed chunks
 * from the heap, most of it CPU in the kernel; docs/benchmark.md). Allocations up
 * to 4 MiB stay on the heap, and up to 64 MiB of free heap is kept before trimming.
 */
const MALLOC_TUNING = { MALLOC_MMAP_THRESHOLD_: "4194304", MALLOC_TRIM_THRESHOLD_: "67108864" };

/**
 * Node/V8 flags for the children. The server runs about one process per core, so V8's
 * GC helper threads only compete with the other processes for the same cores, and
 * single-threaded GC cuts the server's CPU per large routing-replay turn (small turns: no
 * change; docs/benchmark.md).
 * TITO_CHILD_NODE_FLAGS replaces them (space-separated; empty for none).
 */
export function childNodeFlags(env: NodeJS.ProcessEnv = process.env): string[] {
  const custom = env.TITO_CHILD_NODE_FLAGS;
  return custom === undefined ? ["--single-threaded-gc"] : custom.split(/\s+/).filter(Boolean);
}

export function spawnChild(spec: ChildSpec, epoch: number): ChildProcess {
  return fork(spec.entry, [], {
    // A TypeScript entry needs tsx's loader, whose hooks cost each child a thread and its memory.
    execArgv: [
      ...childNodeFlags(),
      ...(spec.nodeFlags ?? []),
      ...(spec.entry.endsWith(".ts") ? ["--import", tsxLoader()] : []),
    ],
    env: {
      ...MALLOC_TUNING,
      ...process.env,
      TITO_CHILD_CONFIG: JSON.stringify({ ...spec.config, name: spec.name, epoch }),
    },
    stdio: ["ignore", 2, 2, "ipc"],
    serialization: "json",
  });
}

export function isAlive(proc: ChildProcess | undefined): boolean {
  return !!proc && proc.exitCode === null && proc.signalCode === null;
}

/** SIGKILL now, if still running. Safe to call from synchronous code (onCrash, exit hooks). */
export function killNow(proc: ChildProcess | undefined): void {
  if (!isAlive(proc)) return;
  try {
    proc!.kill("SIGKILL");
  } catch {
    // already gone
  }
}

/** SIGTERM, wait up to `graceMs`, then SIGKILL; resolves once the process has exited. */
export function stopChild(proc: ChildProcess | undefined, graceMs: number): Promise<void> {
  if (!proc || !isAlive(proc)) return Promise.resolve();
  return new Promise((resolve) => {
    let killTimer: NodeJS.Timeout | undefined;
    proc.once("exit", () => {
      clearTimeout(killTimer);
      resolve();
    });
    try {
      proc.kill("SIGTERM");
    } catch {
      // exit event still fires
    }
    killTimer = setTimeout(() => killNow(proc), graceMs);
    killTimer.unref?.();
  });
}

/** Send over IPC without throwing when the channel is already gone. */
export function sendToChild(proc: ChildProcess | undefined, message: unknown): boolean {
  if (!proc || !proc.connected) return false;
  try {
    proc.send(message as never);
    return true;
  } catch {
    return false;
  }
}

/** How a socket sent to a child fared (sendSocketToChild). */
export type SocketSent =
  /** Written to the child's channel: it has its own copy; close yours. */
  | "sent"
  /** Nothing was written (the channel is gone, the write failed): the socket is still only yours. */
  | "refused"
  /** The child exited, or SOCKET_SEND_MS passed, before the write completed: close yours, answer nothing. */
  | "lost";

/** A send still not written by then is given up (a live child takes a handle in milliseconds). */
const SOCKET_SEND_MS = 10_000;

/**
 * Sends a message with a socket (a records GET's) to a child. Our copy stays open until
 * `done` (Node's keepOpen), and the caller closes it then: with Node's default, a handle
 * sent to a child that has just died waits for an acknowledgement that never comes, and
 * the client's connection would stay open in this process for good. (Node even reports a
 * write to a dead child's channel as a success; once our copy is closed, no process holds
 * the connection and the client sees it close.)
 */
export function sendSocketToChild(
  proc: ChildProcess,
  message: unknown,
  socket: Socket,
  done: (outcome: SocketSent) => void,
): void {
  let settled = false;
  const settle = (outcome: SocketSent) => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    proc.off("exit", onExit);
    done(outcome);
  };
  const onExit = () => settle("lost");
  const timer = setTimeout(onExit, SOCKET_SEND_MS);
  timer.unref();
  proc.once("exit", onExit);
  if (!proc.connected) return settle("refused");
  try {
    proc.send(message as never, socket, { keepOpen: true }, (err) => settle(err ? "refused" : "sent"));
  } catch {
    settle("refused"); // the channel closed under us: nothing was sent
  }
}

/**
 * Runs one of our entry points as a one-shot job (the journal re-shard, before the tree
 * starts): resolves with the info of its `ready` message once it has exited 0; rejects with
 * the message of its `failed` one, or its exit code or signal. Like any child it has the IPC
 * channel, so it dies with the host.
 */
export function runChildJob(spec: ChildSpec): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const proc = spawnChild(spec, 1);
    let result: Record<string, unknown> | undefined;
    let failure: string | undefined;
    proc.on("message", (message: ChildToHost) => {
      if (message.type === "ready") result = message.info;
      else if (message.type === "failed") failure = message.message;
    });
    proc.once("error", (err) => reject(err));
    proc.once("exit", (code, signal) => {
      if (code === 0 && result) resolve(result);
      else reject(new Error(failure ?? `${spec.name} exited with ${signal ?? `code ${code}`}`));
    });
  });
}
