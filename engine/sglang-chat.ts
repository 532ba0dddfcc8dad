// The `sglang-chat` engine API: the chat route of an SGLang that honours `input_ids`
// (the patched engine). The client's request goes to `/v1/chat/completions` with the
// prompt's ids and the fields a trajectory needs forced on (logprobs, meta info, the
// replay flags); the engine parses tool calls and reasoning itself, and the reply's
// `choices[0].meta_info.output_token_logprobs` carries the generated ids. The reply is
// scanned as bytes (reply-scan.ts): the client gets it minus the routing payloads.
import type { Engine, EngineTurn, EngineTurnRequest } from "../sessions/engine-port.ts";
import { EngineReplyError } from "../sessions/errors.ts";
import { proxyToEngine, sendTurn, type AdapterOptions } from "./adapter.ts";
import { scanReply } from "./reply-scan.ts";
import { buildUpstreamBody } from "./request-body.ts";

const CHAT_PATH = "/v1/chat/completions";

export function sglangChatEngine(options: AdapterOptions): Engine {
  const forced: Record<string, unknown> = { logprobs: true, return_meta_info: true, no_stop_trim: false };
  if (options.routingReplay) forced.return_routed_experts = true;
  if (options.indexerReplay) forced.return_indexer_topk = true;
  return {
    api: "sglang-chat",
    async generate(turn: EngineTurnRequest): Promise<EngineTurn> {
      // The family's pinned kwargs reach the engine too (its reasoning parser reads some of them).
      const kwargs = turn.templateKwargs;
      const fields = kwargs && Object.keys(kwargs).length > 0 ? { ...forced, chat_template_kwargs: kwargs } : forced;
      const request = buildUpstreamBody(turn.clientBytes, turn.body, fields, turn.promptIds, turn.promptText);
      return sendTurn(options, turn, CHAT_PATH, request, (res) => {
        const scanned = scanReply(res.body, res.quotes);
        if (scanned.promptTokens !== undefined && scanned.promptTokens !== turn.promptIds.length)
          throw new EngineReplyError(
            `the engine ignored input_ids: it generated from ${JSON.stringify(scanned.promptTokens)} prompt tokens, ` +
              `not the ${turn.promptIds.length} sent (stock SGLang re-renders messages on its chat route); ` +
              "nothing was recorded. Run tito-server with --engine-api sglang-generate for a stock SGLang",
          );
        return {
          requestHasConversation: true,
          completionIds: scanned.completionIds,
          message: scanned.message,
          clientBody: scanned.clientBody,
          headers: res.headers,
          engineWeightVersion: scanned.engineWeightVersion,
        };
      });
    },
    proxy: (req) => proxyToEngine(options, req),
    close: () => options.upstream.close(),
  };
}
