// The HTTP/1.1 client for a plain-http engine origin, built for replies of many MiB. Its
// sockets read with `onread`: a reply body of known length is read by the kernel straight
// into the memory that keeps it (the caller's pooled slabs, or one buffer of exactly that
// size), never into a fresh 64 KiB buffer that a parser then copies on. On this project's
// benchmark machine that is ~0.3 ms of CPU per MiB received, against ~0.6-1.2 through
// undici. Heads, chunked bodies and bodies read to the connection's end pass through a
// small per-connection scratch buffer and are copied out.
//
// Connections are kept alive and reused (most recent first); an idle one closes after
// KEEP_ALIVE_MS, below the common 5 s server default, and a request that finds its
// reused connection closed by the engine before any reply byte is sent once more on a
// new one. Failures reject with a `code` (the socket's own, ECONNRESET for a reply cut
// short, TITO_ENGINE_HTTP for a reply that is not HTTP/1.x) that upstream.ts maps to a 502.
import { connect, type Socket } from "node:net";
import { crc32 } from "../buffers/crc32.ts";
import type { ReplyCollector } from "./reply-buffers.ts";
import type { UpstreamRequest, UpstreamResponse } from "./upstream.ts";

const SCRATCH_BYTES = 16 * 1024;
const MAX_HEAD_BYTES = 64 * 1024;
const KEEP_ALIVE_MS = 4000;
/** Replies at least this large (by content-length) go to pooled buffers when the caller offers them. */
export const POOLED_REPLY_MIN_BYTES = 256 * 1024;

const CRLF = Buffer.from("\r\n");
const QUOTE = 0x22;
const HEAD_END = Buffer.from("\r\n\r\n");
const BAD_HEADER_TEXT = /[\r\n\0]/;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function httpError(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

// Where the reply is in its framing; the body kinds say how its end is known.
const S_HEAD = 0; // reading the status line and headers
const S_LENGTH = 1; // content-length body: `remaining` bytes to go
const S_CHUNK_SIZE = 2; // chunked: a size line
const S_CHUNK_DATA = 3; // chunked: `remaining` bytes of chunk data
const S_CHUNK_END = 4; // chunked: the CRLF after the data
const S_TRAILERS = 5; // chunked: trailer lines up to an empty one
const S_TO_CLOSE = 6; // no framing: the body ends when the connection does

/** One request and its reply on a connection (a retry is a new Exchange). */
class Exchange {
  readonly req: UpstreamRequest;
  readonly resolve: (res: UpstreamResponse) => void;
  readonly reject: (err: Error) => void;
  /** Sends the request once more on a new connection; false when that is not allowed. */
  readonly retry: () => boolean;
  conn: Connection | undefined;
  status = 0;
  headers: Record<string, string> = {};
  keepAlive = true;
  received = false; // any reply byte came
  collector: ReplyCollector | undefined;
  single: Buffer | undefined; // a body of known length, not pooled
  fill = 0;
  parts: Buffer[] = []; // a body of unknown length, as copies
  done = false;
  bodyBytes = 0;
  // Offsets of every '"' in the body, found as the bytes arrive (still in cache): the
  // reply scan then jumps over a many-MiB string without reading it again. The body's
  // CRC-32 likewise: the journal entry that stores the reply needs it.
  readonly quotes: number[] = [];
  crc = 0;

  constructor(
    req: UpstreamRequest,
    resolve: (res: UpstreamResponse) => void,
    reject: (err: Error) => void,
    retry: () => boolean,
  ) {
    this.req = req;
    this.resolve = resolve;
    this.reject = reject;
    this.retry = retry;
  }

  /** Room for up to `max` body bytes of a known-length body. */
  space(max: number): Buffer {
    if (this.collector !== undefined) return this.collector.space(max);
    return this.single!.subarray(this.fill, this.fill + max);
  }

  /** Counts `n` body bytes the socket read into `space` (the view `bytes`). */
  wrote(bytes: Buffer, n: number): void {
    this.#index(bytes.subarray(0, n));
    if (this.collector !== undefined) this.collector.wrote(n);
    else this.fill += n;
  }

  #index(bytes: Buffer): void {
    const at = this.bodyBytes;
    for (let i = bytes.indexOf(QUOTE); i !== -1; i = bytes.indexOf(QUOTE, i + 1)) this.quotes.push(at + i);
    this.crc = crc32(bytes, this.crc);
    this.bodyBytes += bytes.length;
  }

  /** Body bytes that came through the scratch buffer: copied, since the scratch is reused. */
  append(bytes: Buffer): void {
    if (bytes.length === 0) return;
    this.#index(bytes);
    if (this.collector !== undefined) this.collector.push(bytes);
    else if (this.single !== undefined) {
      bytes.copy(this.single, this.fill);
      this.fill += bytes.length;
    } else this.parts.push(Buffer.from(bytes));
  }

  body(): Buffer[] {
    if (this.collector !== undefined) return this.collector.parts();
    if (this.single !== undefined) return this.single.length > 0 ? [this.single] : [];
    return this.parts;
  }
}

class Connection {
  readonly #agent: EngineHttpAgent;
  readonly socket: Socket;
  #scratch = Buffer.allocUnsafeSlow(SCRATCH_BYTES);
  #kept = 0; // unparsed bytes at the start of the scratch (a partial line or head)
  #state = S_HEAD;
  #remaining = 0;
  #exchange: Exchange | undefined;
  #idleTimer: NodeJS.Timeout | undefined;
  #closed = false;
  served = 0; // replies completed on this connection

  constructor(agent: EngineHttpAgent, host: string, port: number) {
    this.#agent = agent;
    this.socket = connect({
      host,
      port,
      noDelay: true,
      onread: { buffer: () => this.#nextBuffer(), callback: (n: number, buf: Uint8Array) => this.#onRead(n, buf) },
    });
    this.socket.on("error", (err) => this.#fail(err));
    this.socket.on("end", () => this.#onEnd());
    this.socket.on("close", () => this.#onEnd());
  }

  start(ex: Exchange, head: string): void {
    if (this.#idleTimer !== undefined) clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    this.#exchange = ex;
    ex.conn = this;
    this.#state = S_HEAD;
    this.#kept = 0;
    const body = ex.req.body;
    this.socket.cork();
    this.socket.write(head, "latin1");
    if (body !== undefined && body.length > 0) this.socket.write(body);
    this.socket.uncork();
  }

  abort(reason: Error): void {
    const ex = this.#exchange;
    this.#exchange = undefined;
    this.destroy();
    if (ex !== undefined) this.#settle(ex, reason);
  }

  destroy(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#idleTimer !== undefined) clearTimeout(this.#idleTimer);
    this.socket.destroy();
    this.#agent.forget(this);
  }

  // Known-length body bytes go straight where the reply keeps them; nothing beyond the
  // body is ever offered, so a read cannot run into the next reply. All else: the scratch.
  #nextBuffer(): Buffer {
    const ex = this.#exchange;
    if (ex !== undefined && this.#state === S_LENGTH && this.#remaining > 0 && this.#kept === 0)
      return ex.space(this.#remaining);
    if (this.#kept === this.#scratch.length) {
      // A head line longer than the scratch: grow it, up to the head limit (checked on parse).
      const bigger = Buffer.allocUnsafeSlow(Math.min(this.#scratch.length * 2, MAX_HEAD_BYTES + SCRATCH_BYTES));
      this.#scratch.copy(bigger, 0, 0, this.#kept);
      this.#scratch = bigger;
    }
    return this.#scratch.subarray(this.#kept);
  }

  #onRead(n: number, buf: Uint8Array): boolean {
    const ex = this.#exchange;
    if (ex === undefined) {
      // Bytes nobody asked for: the connection is out of step; it cannot be reused.
      this.destroy();
      return false;
    }
    ex.received = true;
    if (buf.buffer !== this.#scratch.buffer) {
      ex.wrote(buf as Buffer, n);
      this.#remaining -= n;
      if (this.#remaining === 0) this.#complete(ex);
      return true;
    }
    try {
      const data = this.#scratch.subarray(0, this.#kept + n);
      const used = this.#parse(ex, data);
      const left = data.length - used;
      if (left > 0 && used > 0) this.#scratch.copyWithin(0, used, data.length);
      this.#kept = left;
      if (this.#kept > MAX_HEAD_BYTES)
        throw httpError(`the engine's reply head or chunk line is over ${MAX_HEAD_BYTES} bytes`, "TITO_ENGINE_HTTP");
    } catch (err) {
      this.abort(err as Error);
      return false;
    }
    // A reply still waiting for room in the worker's reply budget is not read: false pauses the socket.
    return ex.collector?.admitted !== false;
  }

  /** Consumes what it can of `data`; returns how many bytes it used (the rest is a partial line). */
  #parse(ex: Exchange, data: Buffer): number {
    let at = 0;
    while (at < data.length && this.#exchange === ex && !ex.done) {
      switch (this.#state) {
        case S_HEAD: {
          const end = data.indexOf(HEAD_END, at);
          if (end < 0) return at;
          this.#onHead(ex, data.toString("latin1", at, end));
          at = end + 4;
          break;
        }
        case S_LENGTH:
        case S_CHUNK_DATA: {
          const n = Math.min(this.#remaining, data.length - at);
          ex.append(data.subarray(at, at + n));
          at += n;
          this.#remaining -= n;
          if (this.#remaining === 0) {
            if (this.#state === S_LENGTH) this.#complete(ex);
            else this.#state = S_CHUNK_END;
          }
          break;
        }
        case S_CHUNK_SIZE: {
          const end = data.indexOf(CRLF, at);
          if (end < 0) return at;
          const line = data.toString("latin1", at, end);
          const hex = line.split(";", 1)[0]!.trim();
          if (!/^[0-9a-fA-F]{1,12}$/.test(hex))
            throw httpError(
              `bad chunk size line from the engine: ${JSON.stringify(line.slice(0, 40))}`,
              "TITO_ENGINE_HTTP",
            );
          this.#remaining = parseInt(hex, 16);
          this.#state = this.#remaining === 0 ? S_TRAILERS : S_CHUNK_DATA;
          at = end + 2;
          break;
        }
        case S_CHUNK_END: {
          if (data.length - at < 2) return at;
          if (data[at] !== 0x0d || data[at + 1] !== 0x0a)
            throw httpError("the engine's chunk data is not followed by CRLF", "TITO_ENGINE_HTTP");
          at += 2;
          this.#state = S_CHUNK_SIZE;
          break;
        }
        case S_TRAILERS: {
          const end = data.indexOf(CRLF, at);
          if (end < 0) return at;
          const empty = end === at;
          at = end + 2;
          if (empty) this.#complete(ex);
          break;
        }
        case S_TO_CLOSE:
          ex.append(data.subarray(at));
          at = data.length;
          break;
      }
    }
    if (at < data.length && this.#exchange === undefined) {
      // Bytes after a complete reply that nobody asked for: not reusable.
      this.destroy();
    }
    return at;
  }

  #onHead(ex: Exchange, head: string): void {
    const lines = head.split("\r\n");
    const m = /^HTTP\/1\.([01]) (\d{3})(?: .*)?$/.exec(lines[0]!);
    if (m === null)
      throw httpError(
        `the engine's reply is not HTTP/1.x: ${JSON.stringify(lines[0]!.slice(0, 60))}`,
        "TITO_ENGINE_HTTP",
      );
    const status = Number(m[2]);
    const headers: Record<string, string> = {};
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(":");
      const name = colon > 0 ? line.slice(0, colon).toLowerCase() : "";
      if (!TOKEN.test(name))
        throw httpError(
          `bad header line in the engine's reply: ${JSON.stringify(line.slice(0, 60))}`,
          "TITO_ENGINE_HTTP",
        );
      const value = line.slice(colon + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    if (status < 200) return; // 1xx: the real head follows
    ex.status = status;
    ex.headers = headers;
    const connection = (headers.connection ?? "").toLowerCase();
    ex.keepAlive = m[1] === "1" ? !/\bclose\b/.test(connection) : /\bkeep-alive\b/.test(connection);
    const te = (headers["transfer-encoding"] ?? "").toLowerCase();
    if (ex.req.method === "HEAD" || status === 204 || status === 304) {
      ex.single = Buffer.alloc(0);
      return this.#complete(ex);
    }
    if (te !== "") {
      if (!/(?:^|,)\s*chunked\s*$/.test(te))
        throw httpError(`unsupported transfer-encoding from the engine: ${te}`, "TITO_ENGINE_HTTP");
      this.#state = S_CHUNK_SIZE;
      this.#startUnknownLength(ex);
      return;
    }
    const cl = headers["content-length"];
    if (cl === undefined) {
      ex.keepAlive = false;
      this.#state = S_TO_CLOSE;
      this.#startUnknownLength(ex);
      return;
    }
    if (!/^\d{1,15}$/.test(cl))
      throw httpError(`bad content-length from the engine: ${JSON.stringify(cl.slice(0, 40))}`, "TITO_ENGINE_HTTP");
    const length = Number(cl);
    if (ex.req.pooled !== undefined && length >= POOLED_REPLY_MIN_BYTES) {
      ex.collector = ex.req.pooled.collector(length);
      if (!ex.collector.admitted) ex.collector.whenAdmitted(() => this.#resumeFor(ex));
    } else ex.single = Buffer.allocUnsafe(length);
    this.#remaining = length;
    this.#state = S_LENGTH;
    if (length === 0) this.#complete(ex);
  }

  // A reply over the worker's reply budget is not read until earlier replies are released
  // (what came with its head is kept; the engine's socket backs up meanwhile). Once it is
  // admitted, reading goes on.
  #resumeFor(ex: Exchange): void {
    if (!this.#closed && this.#exchange === ex) this.socket.resume();
  }

  #startUnknownLength(ex: Exchange): void {
    if (ex.req.pooled !== undefined) ex.collector = ex.req.pooled.collector();
  }

  #complete(ex: Exchange): void {
    ex.done = true;
    this.#exchange = undefined;
    this.served++;
    this.#settle(ex, undefined);
    if (!ex.keepAlive || this.#closed) return this.destroy();
    this.#kept = 0;
    this.#state = S_HEAD;
    this.#idleTimer = setTimeout(() => this.destroy(), KEEP_ALIVE_MS);
    this.#idleTimer.unref();
    this.#agent.idle(this);
  }

  #settle(ex: Exchange, err: Error | undefined): void {
    ex.done = true;
    if (err === undefined) {
      const collector = ex.collector;
      ex.resolve({
        status: ex.status,
        headers: ex.headers,
        body: ex.body(),
        quotes: ex.quotes,
        crc: ex.crc,
        release: collector && (() => collector.release()),
      });
      return;
    }
    ex.collector?.release();
    ex.reject(err);
  }

  #onEnd(): void {
    // A body without framing ends with the connection; any other reply is cut short.
    if (this.#state === S_TO_CLOSE && this.#exchange !== undefined) {
      const ex = this.#exchange;
      this.#exchange = undefined;
      this.destroy();
      return this.#settle(ex, undefined);
    }
    this.#fail(httpError("the engine closed the connection before the reply was complete", "ECONNRESET"));
  }

  #fail(err: Error): void {
    const ex = this.#exchange;
    this.#exchange = undefined;
    this.destroy();
    if (ex === undefined || ex.done) return;
    // The engine closed a kept-alive connection just as we reused it: nothing of the
    // request was answered (so no reply buffers either), and it goes once more on a new one.
    if (this.served > 0 && !ex.received && ex.retry()) {
      ex.done = true;
      return;
    }
    this.#settle(ex, err);
  }
}

/** Keep-alive connections to one plain-http origin. */
export class EngineHttpAgent {
  readonly #host: string;
  readonly #port: number;
  readonly #hostHeader: string;
  readonly #idle: Connection[] = [];
  readonly #all = new Set<Connection>();
  #closed = false;

  constructor(origin: URL) {
    if (origin.protocol !== "http:") throw new TypeError(`EngineHttpAgent speaks plain http, not ${origin.protocol}`);
    this.#host = origin.hostname.replace(/^\[(.*)\]$/, "$1");
    this.#port = Number(origin.port || 80);
    this.#hostHeader = origin.host;
  }

  /** Open connections (idle and busy). */
  get connections(): number {
    return this.#all.size;
  }

  /** One request; the caller's signal aborts it (and drops its connection) at any point. */
  send(req: UpstreamRequest): Promise<UpstreamResponse> {
    return new Promise((resolve, reject) => {
      const signal = req.signal;
      const reason = () => (signal!.reason instanceof Error ? signal!.reason : new Error("request aborted"));
      if (signal?.aborted) return reject(reason());
      let head: string;
      try {
        head = this.#head(req);
      } catch (err) {
        return reject(err as Error);
      }
      let current: Exchange;
      const onAbort = () => {
        if (!current.done) current.conn?.abort(reason());
      };
      const ok = (res: UpstreamResponse) => {
        signal?.removeEventListener("abort", onAbort);
        resolve(res);
      };
      const fail = (err: Error) => {
        signal?.removeEventListener("abort", onAbort);
        reject(err);
      };
      const start = (fresh: boolean): boolean => {
        if (this.#closed || signal?.aborted) return false;
        current = new Exchange(req, ok, fail, () => start(true));
        this.#connection(fresh).start(current, head);
        return true;
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      if (!start(false)) fail(httpError("the engine client was closed", "TITO_ENGINE_CLOSED"));
    });
  }

  idle(conn: Connection): void {
    if (this.#closed) return conn.destroy();
    this.#idle.push(conn);
  }

  forget(conn: Connection): void {
    this.#all.delete(conn);
    const i = this.#idle.indexOf(conn);
    if (i >= 0) this.#idle.splice(i, 1);
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const conn of [...this.#all]) conn.abort(httpError("the engine client was closed", "TITO_ENGINE_CLOSED"));
  }

  /** The most recently idle connection, or (`fresh`, or none idle) a new one. */
  #connection(fresh: boolean): Connection {
    let conn = fresh ? undefined : this.#idle.pop();
    if (conn === undefined) {
      conn = new Connection(this, this.#host, this.#port);
      this.#all.add(conn);
    }
    return conn;
  }

  #head(req: UpstreamRequest): string {
    if (!TOKEN.test(req.method)) throw new TypeError(`invalid HTTP method ${JSON.stringify(req.method)}`);
    if (BAD_HEADER_TEXT.test(req.path) || !req.path.startsWith("/") || /\s/.test(req.path))
      throw new TypeError(`invalid request path ${JSON.stringify(req.path)}`);
    let head = `${req.method} ${req.path} HTTP/1.1\r\nhost: ${this.#hostHeader}\r\n`;
    for (const [name, value] of Object.entries(req.headers)) {
      const lower = name.toLowerCase();
      if (lower === "host" || lower === "content-length" || lower === "transfer-encoding" || lower === "connection")
        continue;
      if (!TOKEN.test(name) || BAD_HEADER_TEXT.test(value))
        throw new TypeError(`invalid header ${JSON.stringify(name)} for the engine request`);
      head += `${name}: ${value}\r\n`;
    }
    const bytes = req.body?.length ?? 0;
    if (bytes > 0 || req.method === "POST" || req.method === "PUT" || req.method === "PATCH")
      head += `content-length: ${bytes}\r\n`;
    return head + "\r\n";
  }
}
