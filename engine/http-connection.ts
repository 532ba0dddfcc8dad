// One keep-alive HTTP/1.1 connection to the engine, built for replies of many MiB. The
// socket (plain TCP or TLS: both read the same way) reads with `onread`: a reply body of
// known length is read straight into the memory that keeps it (the caller's pooled slabs,
// or one buffer of exactly that size), never into a fresh buffer that a parser then copies
// on. Heads, chunked bodies and bodies read to the connection's end pass through a small
// per-connection scratch buffer and are copied out.
//
// A request that finds its reused connection closed by the engine before any reply byte is
// sent once more on a new one. A connection that does not connect within the connect
// timeout fails its request at once. Failures carry a `code` (the socket's own, ECONNRESET
// for a reply cut short, TITO_ENGINE_HTTP for a reply that is not HTTP/1.x,
// TITO_ENGINE_CONNECT_TIMEOUT) that upstream.ts maps to a coded 502.
import type { Socket } from "node:net";
import { httpError, type Exchange } from "./http-exchange.ts";
import { ReplyStream } from "./reply-stream.ts";

const SCRATCH_BYTES = 16 * 1024;
export const MAX_HEAD_BYTES = 64 * 1024;
/** Idle connections close after this, below the common 5 s server keep-alive default. */
const KEEP_ALIVE_MS = 4000;
/** Replies at least this large (by content-length) go to pooled buffers when the caller offers them. */
export const POOLED_REPLY_MIN_BYTES = 256 * 1024;

const CRLF = Buffer.from("\r\n");
const HEAD_END = Buffer.from("\r\n\r\n");
/** An HTTP token (method, header name). */
export const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

// Where the reply is in its framing; the body kinds say how its end is known.
const S_HEAD = 0; // reading the status line and headers
const S_LENGTH = 1; // content-length body: `remaining` bytes to go
const S_CHUNK_SIZE = 2; // chunked: a size line
const S_CHUNK_DATA = 3; // chunked: `remaining` bytes of chunk data
const S_CHUNK_END = 4; // chunked: the CRLF after the data
const S_TRAILERS = 5; // chunked: trailer lines up to an empty one
const S_TO_CLOSE = 6; // no framing: the body ends when the connection does

/** What a connection tells the client that owns it. */
export interface ConnectionOwner {
  idle(conn: Connection): void;
  forget(conn: Connection): void;
}

/** Opens the socket with the connection's read callbacks (net.connect or tls.connect). */
export type Dial = (onread: { buffer: () => Buffer; callback: (n: number, buf: Uint8Array) => boolean }) => {
  socket: Socket;
  /** The event that says the connection is up: "connect", or "secureConnect" for TLS. */
  ready: string;
};

export class Connection {
  readonly #owner: ConnectionOwner;
  readonly socket: Socket;
  #scratch = Buffer.allocUnsafeSlow(SCRATCH_BYTES);
  #kept = 0; // unparsed bytes at the start of the scratch (a partial line or head)
  #state = S_HEAD;
  #remaining = 0;
  #exchange: Exchange | undefined;
  #idleTimer: NodeJS.Timeout | undefined;
  #closed = false;
  served = 0; // replies completed on this connection

  #connectTimer: NodeJS.Timeout | undefined;

  constructor(owner: ConnectionOwner, dial: Dial, connectTimeoutMs: number) {
    this.#owner = owner;
    const { socket, ready } = dial({
      buffer: () => this.#nextBuffer(),
      callback: (n: number, buf: Uint8Array) => this.#onRead(n, buf),
    });
    this.socket = socket;
    this.socket.setNoDelay(true);
    this.#connectTimer = setTimeout(
      () =>
        this.#fail(
          httpError(`no connection to the engine within ${connectTimeoutMs} ms`, "TITO_ENGINE_CONNECT_TIMEOUT"),
        ),
      connectTimeoutMs,
    );
    this.socket.once(ready, () => this.#connected());
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
    // A body in parts goes out as they are: the cork makes them one writev with the head.
    if (Buffer.isBuffer(body)) {
      if (body.length > 0) this.socket.write(body);
    } else if (body !== undefined) for (const part of body) if (part.length > 0) this.socket.write(part);
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
    this.#connected();
    if (this.#idleTimer !== undefined) clearTimeout(this.#idleTimer);
    this.socket.destroy();
    this.#owner.forget(this);
  }

  #connected(): void {
    if (this.#connectTimer !== undefined) clearTimeout(this.#connectTimer);
    this.#connectTimer = undefined;
  }

  // Known-length body bytes go straight where the reply keeps them; nothing beyond the
  // body is ever offered, so a read cannot run into the next reply. All else: the scratch.
  #nextBuffer(): Buffer {
    const ex = this.#exchange;
    if (
      ex !== undefined &&
      ex.stream === undefined &&
      this.#state === S_LENGTH &&
      this.#remaining > 0 &&
      this.#kept === 0
    )
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
    // A reply still waiting for room in the worker's reply budget, or a streamed one its
    // reader has not caught up with, is not read: false pauses the socket.
    return ex.collector?.admitted !== false && ex.stream?.full !== true;
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
    // A streamed 200 is the caller's from its head on; its body goes to `ex.stream` as it comes.
    if (ex.req.stream === true && status === 200) ex.stream = this.#newStream(ex);
    else if (ex.req.method === "HEAD" || status === 204 || status === 304) {
      ex.single = Buffer.alloc(0);
      return this.#complete(ex);
    }
    if (te !== "") {
      if (!/(?:^|,)\s*chunked\s*$/.test(te))
        throw httpError(`unsupported transfer-encoding from the engine: ${te}`, "TITO_ENGINE_HTTP");
      this.#state = S_CHUNK_SIZE;
      return this.#openBody(ex);
    }
    const cl = headers["content-length"];
    if (cl === undefined) {
      ex.keepAlive = false;
      this.#state = S_TO_CLOSE;
      return this.#openBody(ex);
    }
    if (!/^\d{1,15}$/.test(cl))
      throw httpError(`bad content-length from the engine: ${JSON.stringify(cl.slice(0, 40))}`, "TITO_ENGINE_HTTP");
    const length = Number(cl);
    if (ex.stream !== undefined) this.#openBody(ex);
    else if (ex.req.pooled !== undefined && length >= POOLED_REPLY_MIN_BYTES) {
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

  #newStream(ex: Exchange): ReplyStream {
    const abandoned = httpError("the reader abandoned the engine's stream", "TITO_ENGINE_ABANDONED");
    return new ReplyStream({
      resume: () => this.#resumeFor(ex),
      abandon: () => this.#exchange === ex && this.abort(abandoned),
    });
  }

  /** A body whose end is not known up front (or any streamed one): where its bytes go. */
  #openBody(ex: Exchange): void {
    if (ex.stream !== undefined) ex.resolve({ status: ex.status, headers: ex.headers, body: [], stream: ex.stream });
    else if (ex.req.pooled !== undefined) ex.collector = ex.req.pooled.collector();
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
    this.#owner.idle(this);
  }

  #settle(ex: Exchange, err: Error | undefined): void {
    ex.done = true;
    if (ex.stream !== undefined) {
      // The caller has had the reply since its head: the body's end or failure goes to the stream.
      if (err === undefined) ex.stream.end();
      else ex.stream.fail(err);
      return;
    }
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
