// A records GET read by an outside client, a raw TCP socket, and judged the way a careful
// trainer would judge it (docs/http.md, "GET /sessions/{id}"): `complete` when the framing
// is whole (every content-length byte, or the last chunk and the trailers) and the body
// checks out (the trailers' length and CRC-32, and the JSON parses); `errored` when it
// failed at the HTTP level (no response, a non-200, a connection reset, a body short of its
// framing); `cut-clean` when the framing says whole but the body is not: the one outcome a
// server must never give.
import { readdirSync, readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { crc32 } from "../../buffers/crc32.ts";
import { parseResponse, type RawResponse } from "./raw-http.ts";

export type GetOutcome = "complete" | "errored" | "cut-clean";

export interface RecordsGet {
  outcome: GetOutcome;
  /** Why it is not complete. */
  why?: string;
  /** Bytes the client read, head included. */
  bytes: number;
  res?: RawResponse;
  /** The parsed body, when complete. */
  json?: { session_id: string; records: { response: { id?: string } }[]; metadata: Record<string, unknown> };
}

export interface RecordsGetOptions {
  version?: "1.1" | "1.0";
  /** Called once after the first bytes arrived, reading paused until it resolves (a test kills something then). */
  midway?: (socket: Socket) => Promise<void>;
  /** Rejects when no outcome within this (a hang fails the test). */
  boundMs?: number;
}

/**
 * GETs `path` from `url` on a fresh connection and judges what arrived, once the response's
 * framing is whole (every content-length byte, or the last chunk and its trailers) or the
 * connection closed. A response whose framing is whole is over even on a connection kept
 * alive: the router answers its own errors (a 503 while the shard restarts) with
 * `connection: keep-alive`, as HTTP/1.1 lets it, and a client that waited for the close
 * would wait out the server's keep-alive timeout (72 s). A close-delimited body ends only
 * with the connection.
 */
export function recordsGet(url: string, path: string, options: RecordsGetOptions = {}): Promise<RecordsGet> {
  const { hostname, port } = new URL(url);
  const boundMs = options.boundMs ?? 15_000;
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    const framing = new Framing();
    let error: Error | undefined;
    const timer = setTimeout(() => {
      socket.destroy();
      const got = Buffer.concat(parts);
      const status = got.subarray(0, Math.max(0, got.indexOf("\r\n"))).toString("latin1");
      reject(
        new Error(
          `GET ${path}: no outcome within ${boundMs} ms (${got.length} bytes in: ${status || "no status line"})`,
        ),
      );
    }, boundMs);
    const socket = connect(Number(port), hostname, () =>
      socket.write(`GET ${path} HTTP/${options.version ?? "1.1"}\r\nhost: ${hostname}\r\n\r\n`),
    );
    socket.on("data", (data: Buffer) => {
      parts.push(data);
      // The response is over: closing our end judges it now (the 'close' below).
      if (framing.whole(parts, data)) socket.destroy();
    });
    if (options.midway)
      socket.once("data", () => {
        socket.pause();
        options.midway!(socket).then(
          () => socket.resume(),
          (err: Error) => {
            socket.destroy();
            reject(err);
          },
        );
      });
    socket.on("error", (err) => (error = err));
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(judge(Buffer.concat(parts), error));
    });
  });
}

/**
 * Tells, as the bytes of a response come in, when its framing is whole: the content-length
 * bytes after the head, or a chunked body's last chunk and trailers. Never for a
 * close-delimited body, nor for bytes that do not parse as a response head.
 */
class Framing {
  /** The head's length and the body's framing, once the head is in. */
  #head: { bytes: number; length?: number; chunked: boolean } | undefined;
  #received = 0;
  /** The last 4 bytes received: a chunked body ends with the empty line after its trailers. */
  #tail = Buffer.alloc(0);

  whole(parts: readonly Buffer[], data: Buffer): boolean {
    this.#received += data.length;
    this.#tail = Buffer.concat([this.#tail, data.subarray(-4)]).subarray(-4);
    if (this.#head === undefined) {
      const bytes = Buffer.concat(parts);
      const end = bytes.indexOf("\r\n\r\n");
      if (end < 0) return false;
      let res: RawResponse;
      try {
        res = parseResponse(bytes);
      } catch {
        this.#head = { bytes: end + 4, chunked: false }; // not a response we can frame: wait for the close
        return false;
      }
      const length = res.headers["content-length"];
      this.#head = { bytes: end + 4, chunked: res.chunked, length: length === undefined ? undefined : Number(length) };
    }
    const { bytes, length, chunked } = this.#head;
    if (length !== undefined && !chunked) return this.#received - bytes >= length;
    if (!chunked || !this.#tail.equals(END_OF_TRAILERS)) return false;
    try {
      return parseResponse(Buffer.concat(parts)).complete;
    } catch {
      return false;
    }
  }
}

const END_OF_TRAILERS = Buffer.from("\r\n\r\n");

/** What a client makes of `bytes`, read until the framing was whole or the connection closed (with `error`, if it failed). */
export function judge(bytes: Buffer, error?: Error): RecordsGet {
  const errored = (why: string, res?: RawResponse): RecordsGet => ({
    outcome: "errored",
    why,
    bytes: bytes.length,
    res,
  });
  let res: RawResponse;
  try {
    res = parseResponse(bytes);
  } catch (err) {
    return errored(`${(err as Error).message}${error ? ` (${error.message})` : ""}`);
  }
  if (res.status !== 200) return errored(`status ${res.status}`, res);
  if (!res.complete) return errored(`framing not whole${error ? ` (${error.message})` : ""}`, res);
  const framed = res.chunked || res.headers["content-length"] !== undefined;
  // A close-delimited body has no framing to fall short of: a connection error is all that says it was cut.
  if (!framed && error) return errored(`close-delimited body ended by ${error.message}`, res);
  const cut = (why: string): RecordsGet => ({ outcome: "cut-clean", why, bytes: bytes.length, res });
  // The trailers, where the response announced them (a handed-off records body does): a client that can, checks them.
  if (res.chunked && res.headers["trailer"] !== undefined) {
    const { "x-tito-body-bytes": length, "x-tito-body-crc32": crc } = res.trailers;
    if (length !== String(res.body.length)) return cut(`trailer says ${length} bytes, got ${res.body.length}`);
    if (crc !== crc32(res.body).toString(16).padStart(8, "0")) return cut(`trailer CRC-32 ${crc} does not match`);
  }
  try {
    return {
      outcome: "complete",
      bytes: bytes.length,
      res,
      json: JSON.parse(res.body.toString()) as RecordsGet["json"],
    };
  } catch (err) {
    return cut(`framing whole but the JSON is not: ${(err as Error).message}`);
  }
}

/** The pid of `worker`'s records streamer (its child running records-streamer-main), if one runs. */
export function recordsStreamerOf(worker: number): number | undefined {
  const found = readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .find((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
        const ppid = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1];
        return ppid === String(worker) && readFileSync(`/proc/${pid}/cmdline`, "latin1").includes("records-streamer");
      } catch {
        return false; // gone meanwhile
      }
    });
  return found === undefined ? undefined : Number(found);
}
