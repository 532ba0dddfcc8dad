// The upstream client to the inference engine: keep-alive connections per engine origin
// (engine-http.ts for http, an undici Pool for https), the header forwarding rules of
// CONTRACT.md ("Forwarding to the engine"), a per-request timeout, and failures mapped to
// coded 502s naming the cause. Wrapping
// behaviour (timeout, error mapping) is composed once around the raw send (STYLE.md 7).
// It reads reply bodies whole (as their chunk list) and never interprets them.
import type { Pool } from "undici";
import type { ReplyBuffers, ReplyCollector } from "./reply-buffers.ts";
import { EngineHttpAgent, POOLED_REPLY_MIN_BYTES } from "./http-client.ts";
import {
  EngineRequestError,
  EngineTimeoutError,
  EngineUnreachableError,
  UpstreamAbortedError,
  TitoError,
} from "../sessions/errors.ts";

export interface UpstreamRequest {
  method: string;
  /** Path below the engine root, with "?query" when there is one. */
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  signal?: AbortSignal;
  /** Receive a large reply into these pooled buffers; the caller must then call `release`. */
  pooled?: ReplyBuffers;
}

export interface UpstreamResponse {
  status: number;
  headers: Record<string, string>;
  /** The body as received, chunk by chunk: never concatenated (fresh memory is slow to fill). */
  body: Buffer[];
  /** Set when the body lives in pooled buffers: hands them back; the body is invalid after. */
  release?: () => void;
  /** The offsets of every '"' byte in the body, ascending, when the client indexed them. */
  quotes?: readonly number[];
  /** CRC-32 of the whole body, when the client computed it as the bytes arrived. */
  crc?: number;
}

export type Send = (req: UpstreamRequest) => Promise<UpstreamResponse>;

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "content-length",
  "host",
  "upgrade",
  "te",
  "trailer",
]);
const isHopByHop = (name: string) => HOP_BY_HOP.has(name) || name.startsWith("proxy-");

/** The client's headers minus hop-by-hop/framing ones (and `authorization` when the server owns auth). */
export function forwardHeaders(
  headers: Record<string, string | string[] | undefined>,
  dropAuthorization: boolean,
): Record<string, string> {
  const out: Record<string, string> = {};
  // Headers the client names in `Connection` are hop-by-hop too (RFC 9110 7.6.1).
  const named = new Set(
    String(headers.connection ?? "")
      .toLowerCase()
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  );
  for (const [rawName, value] of Object.entries(headers)) {
    const name = rawName.toLowerCase();
    if (value === undefined || isHopByHop(name) || named.has(name)) continue;
    if (dropAuthorization && name === "authorization") continue;
    out[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}

/** The engine's reply headers minus the framing ones (the caller frames the body itself). */
export function replyHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || isHopByHop(name.toLowerCase())) continue;
    out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}

/**
 * One request through the pool's dispatch API: the reply's chunks are collected as they
 * arrive, with no body stream or async iterator per call (request() builds both, and a
 * turn reads the whole reply anyway). 1xx informational heads are skipped.
 */
function poolSend(pool: Pool, basePath: string): Send {
  return (req) =>
    new Promise<UpstreamResponse>((resolve, reject) => {
      const signal = req.signal;
      let controller: { abort(reason: Error): void } | undefined;
      let settled = false;
      let status = 0;
      let headers: Record<string, string> = {};
      const chunks: Buffer[] = [];
      let collector: ReplyCollector | undefined;
      const onAbort = () => {
        const reason = signal!.reason instanceof Error ? signal!.reason : new Error("request aborted");
        controller?.abort(reason);
        finish(reason);
      };
      const finish = (err?: Error) => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener("abort", onAbort);
        if (err) {
          collector?.release();
          reject(err);
        } else if (collector) {
          resolve({ status, headers, body: collector.parts(), release: () => collector!.release() });
        } else {
          resolve({ status, headers, body: chunks });
        }
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      pool.dispatch(
        {
          method: req.method as never,
          path: basePath + req.path,
          headers: req.headers,
          body: req.body && req.body.length > 0 ? req.body : undefined,
        },
        {
          onRequestStart(c) {
            controller = c;
            if (settled) c.abort(signal?.reason instanceof Error ? signal.reason : new Error("request aborted"));
          },
          onResponseStart(_c, statusCode, responseHeaders) {
            if (statusCode < 200) return;
            status = statusCode;
            headers = replyHeaders(responseHeaders);
            if (req.pooled && Number(responseHeaders["content-length"]) >= POOLED_REPLY_MIN_BYTES)
              collector = req.pooled.collector();
          },
          onResponseData(_c, chunk) {
            if (collector) collector.push(chunk);
            else chunks.push(chunk);
          },
          onResponseEnd() {
            finish();
          },
          onResponseError(_c, err) {
            finish(err);
          },
        },
      );
    });
}

/** Aborts the request after `timeoutMs`, and when the caller's signal aborts. */
function withTimeout(send: Send, timeoutMs: number, engineUrl: string): Send {
  return async (req) => {
    const controller = new AbortController();
    const timer = setTimeout(
      () =>
        controller.abort(
          new EngineTimeoutError(
            `engine timeout: no complete reply from ${engineUrl} within ${timeoutMs} ms (${req.method} ${req.path})`,
          ),
        ),
      timeoutMs,
    );
    const onAbort = () => controller.abort(new UpstreamAbortedError({ cause: req.signal?.reason }));
    if (req.signal?.aborted) onAbort();
    else req.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      return await send({ ...req, signal: controller.signal });
    } catch (err) {
      const reason = controller.signal.reason;
      throw controller.signal.aborted && reason instanceof TitoError ? reason : err;
    } finally {
      clearTimeout(timer);
      req.signal?.removeEventListener("abort", onAbort);
    }
  };
}

const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "EPIPE",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  "UND_ERR_CONNECT_TIMEOUT",
]);

/** Every failure becomes a coded 502 naming the engine, the request and the cause. */
function withErrorMapping(send: Send, engineUrl: string): Send {
  return async (req) => {
    try {
      return await send(req);
    } catch (err) {
      if (err instanceof TitoError) throw err;
      const e = err as Error & { code?: string; cause?: { code?: string; message?: string } };
      const code = e.code ?? e.cause?.code;
      const cause = `${code ? code + ": " : ""}${e.message}${e.cause?.message && e.cause.message !== e.message ? ` (${e.cause.message})` : ""}`;
      if (code && UNREACHABLE_CODES.has(code))
        throw new EngineUnreachableError(`engine unreachable at ${engineUrl} (${req.method} ${req.path}): ${cause}`, {
          cause: err,
        });
      if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT") {
        throw new EngineTimeoutError(`engine timeout at ${engineUrl} (${req.method} ${req.path}): ${cause}`, {
          cause: err,
        });
      }
      throw new EngineRequestError(`engine request failed at ${engineUrl} (${req.method} ${req.path}): ${cause}`, {
        cause: err,
      });
    }
  };
}

export interface Upstream {
  send: Send;
  close(): Promise<void>;
}

/** What one engine call looked like, for metrics: status 0 when it failed without a reply. */
export interface UpstreamObservation {
  method: string;
  path: string;
  status: number;
  seconds: number;
}

/** Reports every call's outcome and duration; never changes the call. */
function withObserver(send: Send, observe: (o: UpstreamObservation) => void): Send {
  return async (req) => {
    const start = performance.now();
    let status = 0;
    try {
      const res = await send(req);
      status = res.status;
      return res;
    } finally {
      try {
        observe({ method: req.method, path: req.path, status, seconds: (performance.now() - start) / 1000 });
      } catch {
        // an observer must never fail a turn
      }
    }
  };
}

/** Sends through `agent` with the engine root's path prefixed; reply framing headers dropped. */
function agentSend(agent: EngineHttpAgent, basePath: string): Send {
  return async (req) => {
    const res = await agent.send({ ...req, path: basePath + req.path });
    res.headers = replyHeaders(res.headers);
    return res;
  };
}

/**
 * The engine client: engine-http.ts for a plain-http engine (it reads large replies
 * straight into their pooled buffers), an undici Pool for https.
 */
export function createUpstream(
  engineUrl: string,
  timeoutMs: number,
  observe?: (o: UpstreamObservation) => void,
): Upstream {
  const url = new URL(engineUrl);
  const basePath = url.pathname.replace(/\/+$/, "");
  let raw: Send;
  let close: () => Promise<void>;
  if (url.protocol === "http:") {
    const agent = new EngineHttpAgent(url);
    raw = agentSend(agent, basePath);
    close = () => agent.close();
  } else {
    // undici is loaded only for an https engine: importing it costs a process ~20 MiB.
    // Its own inactivity timers back up the overall one (they would default to 300 s).
    let pool: Promise<Pool> | undefined;
    const getPool = () =>
      (pool ??= import("undici").then(
        ({ Pool }) => new Pool(url.origin, { headersTimeout: timeoutMs, bodyTimeout: timeoutMs }),
      ));
    raw = async (req) => poolSend(await getPool(), basePath)(req);
    close = async () => {
      if (pool !== undefined) await (await pool).close();
    };
  }
  const mapped = withErrorMapping(withTimeout(raw, timeoutMs, engineUrl), engineUrl);
  const send = observe ? withObserver(mapped, observe) : mapped;
  return { send, close };
}
