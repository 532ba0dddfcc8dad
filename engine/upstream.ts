// The upstream client to the inference engine: the one HTTP client (http-client.ts, http
// and https alike) with the header forwarding rules of docs/http.md ("Forwarding to the
// engine"), a per-request timeout, and failures mapped to coded 502/504s naming the cause.
// Wrapping behaviour (timeout, error mapping, metrics) is composed once around the raw
// send. It reads reply bodies whole (as their chunk list) and never interprets them.
import type { ConnectionOptions } from "node:tls";
import type { Send, UpstreamRequest } from "./upstream-types.ts";
import { EngineHttpAgent } from "./http-client.ts";
import {
  EngineRequestError,
  EngineTimeoutError,
  EngineUnreachableError,
  UpstreamAbortedError,
  TitoError,
} from "../sessions/errors.ts";
import { Cancel } from "../buffers/cancel.ts";

export type { Send, UpstreamRequest, UpstreamResponse } from "./upstream-types.ts";

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

/** Aborts the request after `timeoutMs` (a streamed reply: unless its body has ended by then), and when the caller's signal aborts. */
function withTimeout(send: Send, timeoutMs: number, engineUrl: string): Send {
  return async (req) => {
    const controller = new Cancel();
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
    const done = () => {
      clearTimeout(timer);
      req.signal?.removeEventListener("abort", onAbort);
    };
    if (req.signal?.aborted) onAbort();
    else req.signal?.addEventListener("abort", onAbort, { once: true });
    let streamed = false;
    try {
      const res = await send({ ...req, signal: controller.signal });
      streamed = res.stream !== undefined;
      res.stream?.onSettled(done);
      return res;
    } catch (err) {
      const reason = controller.signal.reason;
      throw controller.signal.aborted && reason instanceof TitoError ? reason : err;
    } finally {
      if (!streamed) done();
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
  "ETIMEDOUT",
  "TITO_ENGINE_CONNECT_TIMEOUT",
]);

/** A failure as a coded 502 naming the engine, the request and the cause (a coded error stays as it is). */
function codedFailure(err: unknown, engineUrl: string, req: UpstreamRequest): TitoError {
  if (err instanceof TitoError) return err;
  const e = err as Error & { code?: string; cause?: { code?: string; message?: string } };
  const code = e.code ?? e.cause?.code;
  const cause = `${code ? code + ": " : ""}${e.message}${e.cause?.message && e.cause.message !== e.message ? ` (${e.cause.message})` : ""}`;
  if (code && UNREACHABLE_CODES.has(code))
    return new EngineUnreachableError(`engine unreachable at ${engineUrl} (${req.method} ${req.path}): ${cause}`, {
      cause: err,
    });
  return new EngineRequestError(`engine request failed at ${engineUrl} (${req.method} ${req.path}): ${cause}`, {
    cause: err,
  });
}

/** Every failure, also one in a streamed body, becomes a coded 502. */
function withErrorMapping(send: Send, engineUrl: string): Send {
  return async (req) => {
    try {
      const res = await send(req);
      res.stream?.mapErrors((err) => codedFailure(err, engineUrl, req));
      return res;
    } catch (err) {
      throw codedFailure(err, engineUrl, req);
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

export interface UpstreamOptions {
  /** No complete reply within this is a 504 (the request is aborted). */
  timeoutMs: number;
  /** No connection within this is a 502 "engine unreachable" (default 10 s). */
  connectTimeoutMs?: number;
  /** Reports every call (metrics); must not throw. */
  observe?: (o: UpstreamObservation) => void;
  /** TLS options for an https engine beyond the system's CAs (e.g. `ca`). */
  tls?: ConnectionOptions;
}

/** The engine client for `engineUrl` (http or https), with timeouts, error mapping and metrics composed on. */
export function createUpstream(engineUrl: string, options: UpstreamOptions): Upstream {
  const url = new URL(engineUrl);
  const basePath = url.pathname.replace(/\/+$/, "");
  const agent = new EngineHttpAgent(url, { connectTimeoutMs: options.connectTimeoutMs, tls: options.tls });
  const mapped = withErrorMapping(withTimeout(agentSend(agent, basePath), options.timeoutMs, engineUrl), engineUrl);
  const send = options.observe ? withObserver(mapped, options.observe) : mapped;
  return { send, close: () => agent.close() };
}
