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

/** GETs `path` from `url` on a fresh connection and judges what arrived. */
export function recordsGet(url: string, path: string, options: RecordsGetOptions = {}): Promise<RecordsGet> {
  const { hostname, port } = new URL(url);
  const boundMs = options.boundMs ?? 15_000;
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let error: Error | undefined;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`GET ${path}: no outcome within ${boundMs} ms`));
    }, boundMs);
    const socket = connect(Number(port), hostname, () =>
      socket.write(`GET ${path} HTTP/${options.version ?? "1.1"}\r\nhost: ${hostname}\r\n\r\n`),
    );
    socket.on("data", (data: Buffer) => parts.push(data));
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

/** What a client makes of `bytes`, read until the connection closed (with `error`, if it failed). */
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
