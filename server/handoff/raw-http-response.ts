// One HTTP/1.1 response written straight to a client's TCP socket, for the records
// handoff (docs/architecture.md, "The records handoff"): the worker writes a records GET's
// response with it, and the host its 503 when that worker is gone. The socket carries this
// one response (`connection: close`); whatever the client sends is read and dropped, never
// parsed. The host loads this file: it must import nothing but buffers/ (no sessions/, no
// engine/, no tokenizer).
//
// A response cut short must never look complete (docs/http.md, "GET /sessions/{id}"): a
// body that fails midway, or a stream that ends before the bytes it promised
// (`byteLength`), ends the connection with a TCP reset, never with the last chunk, and a
// chunked body that is whole ends with trailers giving its length and CRC-32 for the
// client to check.
import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { release } from "../../buffers/release.ts";
import { drained } from "../../buffers/drained.ts";
import { crc32 } from "../../buffers/crc32.ts";
import { cutShort } from "../../buffers/cut-short.ts";

export { cutShort };

export type RawHeaders = Readonly<Record<string, string | number | readonly string[]>>;
/** A body read as it is written; `byteLength`, when the stream knows it, is what it promises. */
export type RawStream = AsyncIterable<Buffer> & { readonly byteLength?: number };
export type RawBody = Buffer | Buffer[] | RawStream;

/** The trailers of a whole chunked body: its length in bytes, and its CRC-32 (IEEE, as zlib) in 8 hex digits. */
export const BODY_BYTES_TRAILER = "x-tito-body-bytes";
export const BODY_CRC32_TRAILER = "x-tito-body-crc32";

/**
 * The most of a body written to the socket in one go. A records body is 100-200 MiB in
 * pieces of up to a MiB, and a client that reads fast takes a piece in one system call.
 * Slices take turns (nextTurn): one slice per event-loop iteration for all the responses
 * of the process together, so however many records GETs stream, the loop serves its other
 * work (chat turns) between any two slices.
 */
export const SLICE_BYTES = 256 * 1024;

/** Writers waiting for their next slice's turn, in order. */
const waiting: (() => void)[] = [];
let turnScheduled = false;

/** Resolves on a later event-loop iteration, one waiter per iteration (round-robin across writers). */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    if (!turnScheduled) {
      turnScheduled = true;
      setImmediate(giveTurn);
    }
  });
}

function giveTurn(): void {
  waiting.shift()?.();
  if (waiting.length > 0) setImmediate(giveTurn);
  else turnScheduled = false;
}
/** How long the socket may stay open after the response, for the client to close it first. */
const LINGER_MS = 5_000;
/** Framing is this writer's business: a caller's header of these names is dropped. */
const FRAMING = new Set(["content-length", "transfer-encoding", "connection", "keep-alive"]);
const CRLF = Buffer.from("\r\n");

/**
 * Takes a socket handed over by another process: never lets a socket error crash us, reads
 * and drops whatever the client sends, keeps our half open when the client closes its own
 * (a client may half-close after its request), and never outlives its response for long.
 */
export function adoptSocket(socket: Socket): void {
  socket.allowHalfOpen = true;
  socket.on("error", () => socket.destroy());
  socket.resume();
}

/**
 * Writes status, headers and body, then ends the socket. `headers` are merged in order
 * (later wins); framing comes from the body: `content-length` for a Buffer or a Buffer
 * list, `transfer-encoding: chunked` with the body's length and CRC-32 as trailers for a
 * stream. Each piece is released (buffers/release.ts) once the socket has taken it.
 * Resolves true when the whole body was written, false when the client left, the body
 * failed or a stream ended short of its `byteLength` (the connection is reset then:
 * buffers/cut-short.ts).
 * `sliceBytes`: the most written in one go (SLICE_BYTES; a process that serves nothing
 * else, the records streamer, writes whole pieces).
 */
export async function writeRawResponse(
  socket: Socket,
  status: number,
  headers: readonly RawHeaders[],
  body: RawBody,
  onBytes?: (bytes: number) => void,
  sliceBytes = SLICE_BYTES,
): Promise<boolean> {
  const stream = !Buffer.isBuffer(body) && !Array.isArray(body);
  const pieces = stream ? [] : Buffer.isBuffer(body) ? [body] : body;
  const length = pieces.reduce((n, piece) => n + piece.length, 0);
  const framing = stream
    ? `transfer-encoding: chunked\r\ntrailer: ${BODY_BYTES_TRAILER}, ${BODY_CRC32_TRAILER}`
    : `content-length: ${length}`;
  socket.write(responseHead(status, headers, framing));
  const complete = stream
    ? await writeChunked(socket, body as RawStream, sliceBytes, onBytes)
    : await writePieces(socket, pieces, sliceBytes, onBytes);
  if (complete) finish(socket);
  else cutShort(socket);
  return complete;
}

/** An error as the HTTP contract writes it: a coded error, or its fields as they crossed IPC. */
export interface ErrorReply {
  status: number;
  code: string;
  message: string;
}

/** A JSON error response, `{"error": message, "code": code}`, in the router's shape (its headers first). */
export function writeErrorResponse(socket: Socket, headers: RawHeaders, err: ErrorReply): void {
  const body = Buffer.from(JSON.stringify({ error: err.message, code: err.code }));
  void writeRawResponse(socket, err.status, [headers, { "content-type": "application/json; charset=utf-8" }], body);
}

function responseHead(status: number, headers: readonly RawHeaders[], framing: string): Buffer {
  const merged = new Map<string, string | number | readonly string[]>();
  for (const set of headers)
    for (const [name, value] of Object.entries(set)) {
      const lower = name.toLowerCase();
      if (!FRAMING.has(lower)) merged.set(lower, value);
    }
  if (!merged.has("date")) merged.set("date", new Date().toUTCString());
  const lines = [`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}`];
  for (const [name, value] of merged)
    for (const one of Array.isArray(value) ? value : [value]) {
      const text = String(one);
      // Only our own headers come here; one with a line break would forge another: left out.
      if (!/[\r\n]/.test(text) && !/[\r\n:]/.test(name)) lines.push(`${name}: ${text}`);
    }
  lines.push(framing, "connection: close");
  return Buffer.from(`${lines.join("\r\n")}\r\n\r\n`, "latin1");
}

async function writePieces(
  socket: Socket,
  pieces: readonly Buffer[],
  sliceBytes: number,
  onBytes?: (bytes: number) => void,
) {
  let taken = 0; // pieces handed to the socket, which releases each once written (or destroyed)
  try {
    while (taken < pieces.length && !socket.destroyed) {
      const piece = pieces[taken++]!;
      onBytes?.(piece.length);
      await writeSliced(socket, piece, sliceBytes);
    }
    return !socket.destroyed;
  } finally {
    for (let i = taken; i < pieces.length; i++) release(pieces[i]!);
  }
}

/**
 * Writes `piece` in slices of `sliceBytes`, yielding to the event loop after each (and
 * waiting for 'drain' when the socket is full); releases the piece once the socket has
 * taken its last slice, or at once if the socket is gone before that.
 */
async function writeSliced(socket: Socket, piece: Buffer, sliceBytes: number): Promise<void> {
  for (let at = 0; at < piece.length; at += sliceBytes) {
    if (socket.destroyed) return release(piece);
    const end = Math.min(at + sliceBytes, piece.length);
    const last = end === piece.length;
    const ok = socket.write(piece.subarray(at, end), last ? () => release(piece) : undefined);
    if (!ok) await drained(socket);
    await nextTurn();
  }
  if (piece.length === 0) release(piece);
}

/**
 * The chunks of `body`, then the last chunk with the trailers, only if every byte the
 * body promised (`byteLength`, when it says) went out: false otherwise, and the caller
 * resets the connection. A stream that ends early (stopped by someone else, a file
 * shorter than its range) must not end the response as if it were whole.
 */
async function writeChunked(socket: Socket, body: RawStream, sliceBytes: number, onBytes?: (bytes: number) => void) {
  const promised = body.byteLength;
  let sent = 0;
  let crc = 0;
  try {
    for await (const piece of body) {
      if (socket.destroyed || (promised !== undefined && sent + piece.length > promised)) {
        release(piece);
        return false; // leaving the loop stops the stream (its return())
      }
      // An empty chunk would end the body: nothing to send.
      if (piece.length === 0) continue;
      sent += piece.length;
      crc = crc32(piece, crc);
      onBytes?.(piece.length);
      socket.write(`${piece.length.toString(16)}\r\n`);
      await writeSliced(socket, piece, sliceBytes);
      if (!socket.write(CRLF)) await drained(socket);
    }
  } catch {
    return false; // e.g. a journal read failed: the response is cut short
  }
  if (socket.destroyed || (promised !== undefined && sent !== promised)) return false;
  const hex = crc.toString(16).padStart(8, "0");
  socket.write(`0\r\n${BODY_BYTES_TRAILER}: ${sent}\r\n${BODY_CRC32_TRAILER}: ${hex}\r\n\r\n`);
  return true;
}

/** Ends our half, and destroys the socket if the client has not closed it a while later. */
function finish(socket: Socket): void {
  socket.end();
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once("close", () => clearTimeout(timer));
}
