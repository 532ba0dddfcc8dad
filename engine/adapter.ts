// What every engine adapter shares: its options, the client's headers as they go upstream,
// the session's proxy route, and sending one turn's request, where a non-200 reply becomes
// the refusal passed to the client and a 200 one is handed to the adapter's reader with
// its pooled buffers released exactly once (by the caller, after the journal write, or here
// when the reader fails).
import type { EngineCompletion, EngineProxyRequest, EngineTurn, EngineTurnRequest } from "../sessions/engine-port.ts";
import { EngineAbortedError } from "../sessions/errors.ts";
import { checkProxyPath } from "./proxy-path.ts";
import type { ReplyBuffers } from "./reply-buffers.ts";
import { forwardHeaders, type Upstream, type UpstreamResponse } from "./upstream.ts";

export interface AdapterOptions {
  upstream: Upstream;
  /** Ask for routing-replay payloads (`return_routed_experts`). */
  routingReplay: boolean;
  /** Ask for indexer top-k payloads (`return_indexer_topk`). */
  indexerReplay: boolean;
  /** The server owns authentication: the client's `authorization` never goes upstream. */
  dropAuthorization: boolean;
  /** Receive large replies into these pooled buffers (when the record store does not keep replies). */
  replyBuffers?: ReplyBuffers;
  /** Counts tool-call blocks of a token-level completion that did not parse (a metric); must not throw. */
  onMalformedToolCalls?: (count: number) => void;
  /** Counts generations the engine aborted (a metric, `tito_engine_aborts_total`); must not throw. */
  onEngineAbort?: () => void;
  /** The served model name every upstream request carries (`--engine-model`), overriding /v1/models. */
  engineModel?: string;
  /** `--engine-session-headers`: the headers a session's requests carry its routing key in (none: empty). */
  sessionHeaders?: readonly string[];
}

/** `err` unchanged; an engine abort is counted first (the metric of EngineAbortedError). */
export function countAbort(options: AdapterOptions, err: unknown): unknown {
  if (err instanceof EngineAbortedError) options.onEngineAbort?.();
  return err;
}

/**
 * The session's routing key set in each of the --engine-session-headers, over a client's own
 * header of that name: a gateway in front of several engines (SGLang's model gateway reads
 * X-SMG-Routing-Key, vLLM's router X-Session-ID; docs/engines.md) keeps the session on one.
 */
function withRoutingKey(out: Record<string, string>, options: AdapterOptions, routingKey: string | undefined) {
  if (routingKey !== undefined) for (const name of options.sessionHeaders ?? []) out[name.toLowerCase()] = routingKey;
  return out;
}

/** The client's headers as they go to the engine with a JSON body we wrote, and the session's routing key. */
export function turnHeaders(
  options: AdapterOptions,
  headers: EngineTurnRequest["headers"],
  routingKey?: string,
): Record<string, string> {
  const out = forwardHeaders(headers, options.dropAuthorization);
  // The reply is scanned as bytes: ask for it uncompressed.
  delete out["accept-encoding"];
  out["content-type"] = "application/json";
  return withRoutingKey(out, options, routingKey);
}

/** A session's proxy route: the path checked against escaping the engine root, the rest passed on. */
export async function proxyToEngine(options: AdapterOptions, req: EngineProxyRequest) {
  const path = checkProxyPath(req.path) + (req.query ? `?${req.query}` : "");
  const headers = withRoutingKey(forwardHeaders(req.headers, options.dropAuthorization), options, req.routingKey);
  return options.upstream.send({ method: req.method.toUpperCase(), path, headers, body: req.body, signal: req.signal });
}

/** What an adapter's reader makes of a 200 reply. */
export type TurnOutcome = Pick<
  EngineCompletion,
  "requestHasConversation" | "completionIds" | "message" | "clientBody" | "headers" | "engineWeightVersion"
>;

/** POSTs one turn's `request` to `path` and reads a 200 reply with `read` (which throws coded errors). */
export async function sendTurn(
  options: AdapterOptions,
  turn: EngineTurnRequest,
  path: string,
  request: Buffer[],
  read: (res: UpstreamResponse) => TurnOutcome,
): Promise<EngineTurn> {
  const res = await options.upstream.send({
    method: "POST",
    path,
    headers: turnHeaders(options, turn.headers, turn.routingKey),
    body: request,
    signal: turn.signal,
    pooled: options.replyBuffers,
  });
  try {
    if (res.status !== 200) {
      // Pooled buffers are reused once released: what is sent on is copied first.
      const body = res.release ? [Buffer.concat(res.body)] : res.body;
      return { ok: false, status: res.status, headers: res.headers, body };
    }
    let outcome: TurnOutcome;
    try {
      outcome = read(res);
    } catch (err) {
      throw countAbort(options, err);
    }
    const release = res.release;
    res.release = undefined; // the caller releases it now
    return { ok: true, path, request, response: res.body, responseCrc: res.crc, release, ...outcome };
  } finally {
    res.release?.();
  }
}
