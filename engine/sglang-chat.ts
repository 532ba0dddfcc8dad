// The `sglang-chat` engine API: the chat route of an SGLang that honours `input_ids`
// (the patched engine). The client's request goes to `/v1/chat/completions` with the
// prompt's ids and the fields a trajectory needs forced on (logprobs, meta info, the
// replay flags); the engine parses tool calls and reasoning itself, and the reply's
// `choices[0].meta_info.output_token_logprobs` carries the generated ids. The reply is
// scanned as bytes (reply-scan.ts): the client gets it minus the routing payloads.
import type { Engine, EngineProxyRequest, EngineTurn, EngineTurnRequest } from "../sessions/engine-port.ts";
import { EngineReplyError } from "../sessions/errors.ts";
import { checkProxyPath } from "./proxy-path.ts";
import type { ReplyBuffers } from "./reply-buffers.ts";
import { scanReply } from "./reply-scan.ts";
import { buildUpstreamBody } from "./request-body.ts";
import { forwardHeaders, type Upstream } from "./upstream.ts";

const CHAT_PATH = "/v1/chat/completions";

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
}

/** The client's headers as they go to the engine with a JSON body we wrote. */
export function turnHeaders(options: AdapterOptions, headers: EngineTurnRequest["headers"]): Record<string, string> {
  const out = forwardHeaders(headers, options.dropAuthorization);
  // The reply is scanned as bytes: ask for it uncompressed.
  delete out["accept-encoding"];
  out["content-type"] = "application/json";
  return out;
}

/** A session's proxy route: the path checked against escaping the engine root, the rest passed on. */
export async function proxyToEngine(options: AdapterOptions, req: EngineProxyRequest) {
  const path = checkProxyPath(req.path) + (req.query ? `?${req.query}` : "");
  const headers = forwardHeaders(req.headers, options.dropAuthorization);
  return options.upstream.send({ method: req.method.toUpperCase(), path, headers, body: req.body, signal: req.signal });
}

export function sglangChatEngine(options: AdapterOptions): Engine {
  const forced: Record<string, unknown> = { logprobs: true, return_meta_info: true, no_stop_trim: false };
  if (options.routingReplay) forced.return_routed_experts = true;
  if (options.indexerReplay) forced.return_indexer_topk = true;
  return {
    api: "sglang-chat",
    async generate(turn: EngineTurnRequest): Promise<EngineTurn> {
      const request = buildUpstreamBody(turn.clientBytes, turn.body, forced, turn.promptIds, turn.promptText);
      const res = await options.upstream.send({
        method: "POST",
        path: CHAT_PATH,
        headers: turnHeaders(options, turn.headers),
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
        const scanned = scanReply(res.body, res.quotes);
        if (scanned.promptTokens !== undefined && scanned.promptTokens !== turn.promptIds.length)
          throw new EngineReplyError(
            `the engine ignored input_ids: it generated from ${JSON.stringify(scanned.promptTokens)} prompt tokens, ` +
              `not the ${turn.promptIds.length} sent (stock SGLang re-renders messages on its chat route); ` +
              "nothing was recorded. Run tito-server with --engine-api sglang-generate for a stock SGLang",
          );
        const release = res.release;
        res.release = undefined; // the caller releases it now
        return {
          ok: true,
          requestHasConversation: true,
          path: CHAT_PATH,
          request,
          response: res.body,
          responseCrc: res.crc,
          completionIds: scanned.completionIds,
          message: scanned.message,
          clientBody: scanned.clientBody,
          headers: res.headers,
          release,
        };
      } finally {
        res.release?.();
      }
    },
    proxy: (req) => proxyToEngine(options, req),
    close: () => options.upstream.close(),
  };
}
