// Entry point of a worker's records streamer (records-streamer.ts): lowers its own CPU
// priority to the nice value it was given, then writes each records response the worker
// hands it — a client's socket and the body's parts, file ranges by path — reading the
// journal files itself, and tells the worker when each is over. It loads no tokenizer, no
// session core and no actor system, and exits with its worker (child-runtime.ts).
import { readdirSync } from "node:fs";
import { Socket } from "node:net";
import { setPriority } from "node:os";
import { startChildRuntime } from "../../actors/child-runtime.ts";
import { openRecordStream } from "../../sessions/journal/record-stream.ts";
import { adoptSocket, cutShort, writeErrorResponse, writeRawResponse } from "../handoff/raw-http-response.ts";
import {
  fromWire,
  isStreamRecords,
  type RecordsStreamed,
  type StreamRecords,
  type StreamerConfig,
} from "./records-streamer-protocol.ts";
import { RecordsUnreadableError } from "./errors.ts";

const runtime = startChildRuntime<StreamerConfig, RecordsStreamed>();
const { name, nice } = runtime.config;
try {
  lowerPriority(nice);
} catch (err) {
  // Raising one's own nice value is always allowed on Linux; should a sandbox refuse it, stream anyway.
  process.stderr.write(`${name}: cannot lower its priority to nice ${nice}: ${(err as Error).message}\n`);
}

/**
 * Lowers every thread of this process to `nice`. On Linux a nice value belongs to a thread
 * (setpriority(2) on pid 0 changes only the caller's), and a thread takes its creator's:
 * the threads Node started before this line would keep nice 0. Among them is libuv's pool,
 * which reads the journal's files (FileHandle.read: a copy of every byte streamed), so
 * part of each GET's work would compete with chat turns at full priority (issue 47).
 */
function lowerPriority(to: number): void {
  setPriority(to); // this thread, and every thread it starts from now on
  let tids: string[];
  try {
    tids = readdirSync("/proc/self/task");
  } catch {
    return; // no /proc (not Linux): setpriority(2) there covers the whole process
  }
  for (const tid of tids) {
    try {
      setPriority(Number(tid), to);
    } catch {
      // a thread that has exited since the listing
    }
  }
}

/** The sockets of the responses being written. */
const writing = new Set<Socket>();
// The worker died or asked us to stop: the responses in flight are cut, and each client
// gets a reset at once, not whatever the exit leaves (docs/http.md: a records body cut
// short never looks complete).
runtime.onClose(() => {
  for (const socket of writing) cutShort(socket);
});

async function stream(message: StreamRecords, socket: Socket): Promise<void> {
  adoptSocket(socket);
  writing.add(socket);
  socket.once("close", () => writing.delete(socket));
  let bytes = 0;
  let complete = false;
  // Through the worker's own descriptors (/proc/<worker>/fd/<fd>): its pinned segments, even unlinked ones.
  const opened = await openRecordStream(fromWire(message.parts), process.ppid).catch((err: Error) => err);
  if (opened instanceof Error) {
    // Nothing is written yet, so the client gets a clear error instead of a cut response.
    writeErrorResponse(socket, message.headers[0] ?? {}, new RecordsUnreadableError(opened.message));
  } else {
    // No chat turns wait on this event loop, so pieces go out whole: fewer system calls and
    // loop turns per MiB; the kernel's scheduler, not slicing, keeps turns first.
    const count = (n: number) => (bytes += n);
    complete = await writeRawResponse(socket, message.status, message.headers, opened, count, Infinity);
  }
  await runtime.report({ type: "records-streamed", id: message.id, complete, bytes });
}

runtime.onMessage((message, handle) => {
  if (!(handle instanceof Socket)) return;
  if (isStreamRecords(message)) void stream(message, handle);
  else handle.destroy();
});
runtime.ready({ nice });
