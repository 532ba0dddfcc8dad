// Spawning and stopping one of our own entry points as a child process. The child
// speaks to its owner over the IPC channel (control-messages.ts); its stdout and
// stderr go to the host's stderr, so the CLI's stdout carries only its ready line.
// A child exits on its own when the IPC channel closes (see child-runtime.ts).
import { fork, type ChildProcess } from "node:child_process";
import { createRequire } from "node:module";
import type { Socket } from "node:net";
import { pathToFileURL } from "node:url";
import { HANDLE_ID, isHandleTaken, type ChildToHost } from "./control-messages.ts";

const require = createRequire(import.meta.url);
/** tsx's ESM loader, by absolute URL so a child starts the same from any cwd; only .ts entries need it. */
const tsxLoader = () => pathToFileURL(require.resolve("tsx")).href;

export interface ChildSpec {
  /** Actor name: "router" or "shard-3". */
  name: string;
  /** Absolute path of the entry point: a .js file (plain node), or a .ts file run through a TypeScript loader. */
  entry: string;
  /** Passed to the child as JSON in TITO_CHILD_CONFIG; `epoch` is added per spawn. */
  config: Record<string, unknown>;
  /** Node flags the child's own code relies on: always passed, after the tuning flags below. */
  nodeFlags?: string[];
  /** The module a .ts entry is loaded with (`--import`, a URL or path): default tsx's. */
  tsLoader?: string;
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
      ...(spec.entry.endsWith(".ts") ? ["--import", spec.tsLoader ?? tsxLoader()] : []),
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
  /** The child said it holds the socket (HANDLE_TAKEN): close yours, the rest is the child's. */
  | "sent"
  /**
   * The child never took it: nothing was written, or the child is gone and its channel
   * drained without a word of it. The socket is still only yours, untouched.
   */
  | "refused"
  /** SOCKET_SEND_MS passed with the child alive and silent: close yours, answer nothing. */
  | "lost";

/** A send still not taken by then is given up (a live child takes a handle in milliseconds). */
const SOCKET_SEND_MS = 10_000;

/** Per child: the sends waiting for its HANDLE_TAKEN, by HANDLE_ID. */
interface Takes {
  next: number;
  waiting: Map<number, (taken: boolean) => void>;
}
const takes = new WeakMap<ChildProcess, Takes>();

/** One listener per child for its HANDLE_TAKEN answers; at its `close` (exited, every message read) the rest were never taken. */
function takesOf(proc: ChildProcess): Takes {
  const found = takes.get(proc);
  if (found !== undefined) return found;
  const t: Takes = { next: 0, waiting: new Map() };
  takes.set(proc, t);
  proc.on("message", (message: unknown) => {
    if (isHandleTaken(message)) t.waiting.get(message[HANDLE_ID])?.(true);
  });
  proc.once("close", () => {
    for (const settle of [...t.waiting.values()]) settle(false);
  });
  return t;
}

/**
 * Sends a message with a socket (a records GET's) to a child. Our copy stays open until
 * `done` (Node's keepOpen), and the caller closes it then, or answers on it when the child
 * never took it. Only the child's word counts (its runtime's HANDLE_TAKEN, child-runtime.ts):
 * Node reports a write to the channel of a child that died a moment ago as a success, and
 * with Node's default (no keepOpen) a handle sent to such a child would wait for an
 * acknowledgement that never comes, the client's connection open in this process for good.
 */
export function sendSocketToChild(
  proc: ChildProcess,
  message: object,
  socket: Socket,
  done: (outcome: SocketSent) => void,
): void {
  if (!proc.connected) return done("refused");
  const t = takesOf(proc);
  const id = ++t.next;
  let settled = false;
  const settle = (outcome: SocketSent) => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    t.waiting.delete(id);
    done(outcome);
  };
  const timer = setTimeout(() => settle("lost"), SOCKET_SEND_MS);
  timer.unref();
  t.waiting.set(id, (taken) => settle(taken ? "sent" : "refused"));
  try {
    proc.send({ ...message, [HANDLE_ID]: id } as never, socket, { keepOpen: true }, (err) => {
      if (err) settle("refused");
    });
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
