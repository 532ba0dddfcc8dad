// The engine's HTTP/1.1 client: keep-alive connections to one origin, http or https with
// the same behaviour (http-connection.ts reads both kinds of socket the same way), reused
// most recent first. It builds the request head (refusing CR/LF in headers), retries a
// request once on a new connection when the engine closed a kept one just as it was reused,
// and fails a connection that does not come up within the connect timeout.
import { connect as netConnect, isIP, type TcpNetConnectOpts } from "node:net";
import { connect as tlsConnect, type ConnectionOptions } from "node:tls";
import { Connection, TOKEN, type Dial } from "./http-connection.ts";
import { Exchange, httpError } from "./http-exchange.ts";
import type { UpstreamRequest, UpstreamResponse } from "./upstream-types.ts";

export { POOLED_REPLY_MIN_BYTES } from "./http-connection.ts";

const BAD_HEADER_TEXT = /[\r\n\0]/;

export interface EngineHttpAgentOptions {
  /** A connection that is not up within this fails its request (default 10 s). */
  connectTimeoutMs?: number;
  /** TLS options for an https origin beyond the defaults (e.g. `ca`); the system's CAs otherwise. */
  tls?: ConnectionOptions;
}

/** Keep-alive connections to one http or https origin. */
export class EngineHttpAgent {
  readonly #dial: Dial;
  readonly #connectTimeoutMs: number;
  readonly #hostHeader: string;
  readonly #idle: Connection[] = [];
  readonly #all = new Set<Connection>();
  #closed = false;

  constructor(origin: URL, options: EngineHttpAgentOptions = {}) {
    const host = origin.hostname.replace(/^\[(.*)\]$/, "$1");
    this.#connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    this.#hostHeader = origin.host;
    if (origin.protocol === "http:") {
      const port = Number(origin.port || 80);
      this.#dial = (onread) => ({ socket: netConnect({ host, port, onread }), ready: "connect" });
    } else if (origin.protocol === "https:") {
      const port = Number(origin.port || 443);
      // SNI takes a host name, never an address.
      const servername = isIP(host) === 0 ? host : undefined;
      const tls = { ALPNProtocols: ["http/1.1"], ...options.tls, host, port, servername };
      this.#dial = (onread) => {
        // Node's tls.connect takes `onread` as net.connect does; its typings do not say so.
        const withRead: ConnectionOptions & Pick<TcpNetConnectOpts, "onread"> = { ...tls, onread };
        return { socket: tlsConnect(withRead), ready: "secureConnect" };
      };
    } else throw new TypeError(`the engine client speaks http and https, not ${origin.protocol}`);
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
        // A streamed reply can still be aborted while its body comes.
        if (res.stream !== undefined) res.stream.onSettled(() => signal?.removeEventListener("abort", onAbort));
        else signal?.removeEventListener("abort", onAbort);
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
      conn = new Connection(this, this.#dial, this.#connectTimeoutMs);
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
    const bytes = bodyLength(req.body);
    if (bytes > 0 || req.method === "POST" || req.method === "PUT" || req.method === "PATCH")
      head += `content-length: ${bytes}\r\n`;
    return head + "\r\n";
  }
}

/** A request body's length in bytes (0 without one). */
function bodyLength(body: UpstreamRequest["body"]): number {
  if (body === undefined) return 0;
  if (Buffer.isBuffer(body)) return body.length;
  let n = 0;
  for (const part of body) n += part.length;
  return n;
}
