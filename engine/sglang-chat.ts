// The `sglang-chat` engine API: the chat route of an SGLang that honours `input_ids`
// (stock SGLang's ChatCompletionRequest takes them, "bypasses chat template tokenization
// entirely": python/sglang/srt/entrypoints/openai/protocol.py @
// 004c82e07d876f6e4a0ad6e15325706b0f478f1a; an older SGLang, or the reference server's
// patched one). The client's request goes to `/v1/chat/completions` with the
// prompt's ids and the fields a trajectory needs forced on (logprobs, meta info, the
// replay flags); the engine parses tool calls and reasoning itself, and the reply's
// `choices[0].meta_info.output_token_logprobs` carries the generated ids. The reply is
// scanned as bytes (reply-scan.ts): the client gets it minus the routing payloads.
// A client's `stream: true` is asked of the engine as `stream: false`: SGLang's chat stream
// carries no per-token ids, so the turn could not be recorded from it. The whole reply is
// then sent to the client as `chat.completion.chunk` events, the first byte once the
// engine has finished.
import type { Engine, EngineCompletion, EngineStream, EngineTurn, EngineTurnRequest } from "../sessions/engine-port.ts";
import type { CompletionDelta } from "../sessions/completion-stream.ts";
import type { ToolCall } from "../sessions/families/index.ts";
import { SSE_HEADERS } from "../sessions/sse.ts";
import { ChatChunks, includeUsage, type Usage } from "./chat-chunks.ts";
import { EngineReplyError, InvalidChatRequestError } from "../sessions/errors.ts";
import { proxyToEngine, sendTurn, type AdapterOptions } from "./adapter.ts";
import { servedModel } from "./served-model.ts";
import { optionalContextLength } from "./context-length.ts";
import { scanReply } from "./reply-scan.ts";
import { buildUpstreamBody } from "./request-body.ts";

const CHAT_PATH = "/v1/chat/completions";

export function sglangChatEngine(options: AdapterOptions): Engine {
  const forced: Record<string, unknown> = { logprobs: true, return_meta_info: true, no_stop_trim: false };
  if (options.routingReplay) forced.return_routed_experts = true;
  if (options.indexerReplay) forced.return_indexer_topk = true;
  return {
    api: "sglang-chat",
    contextLength: optionalContextLength(servedModel(options)),
    async generate(turn: EngineTurnRequest): Promise<EngineTurn> {
      // The family's pinned kwargs reach the engine too (its reasoning parser reads some of them).
      const kwargs = turn.templateKwargs;
      let fields = kwargs && Object.keys(kwargs).length > 0 ? { ...forced, chat_template_kwargs: kwargs } : forced;
      let body = turn.body;
      // SGLang refuses 0 (SamplingParams.verify, python/sglang/srt/sampling/sampling_params.py @
      // 00c17cafcb9e289d5ca97c50e44ada54e4fd5b03): a 400 naming the field, nothing sent.
      if (body.top_k === 0)
        throw new InvalidChatRequestError("`top_k` must be -1 (disable) or at least 1 with --engine-api sglang-chat");
      // The model's sampling defaults where the client left a field unset, as on every engine API.
      const defaults = Object.entries(turn.samplingDefaults ?? {}).filter(
        ([k]) => body[k] === undefined || body[k] === null,
      );
      if (defaults.length > 0) fields = { ...Object.fromEntries(defaults), ...fields };
      // ChatCompletionRequest's `cache_salt` (python/sglang/srt/entrypoints/openai/protocol.py @
      // 004c82e07d876f6e4a0ad6e15325706b0f478f1a; honoured from SGLang PR #23300 on); ours over a client's.
      if (turn.cacheSalt !== undefined) fields = { ...fields, cache_salt: turn.cacheSalt };
      if (turn.stream === true) {
        body = { ...body };
        delete body.stream_options; // asked of the engine without a stream
        fields = { ...fields, stream: false };
      }
      const request = buildUpstreamBody(turn.clientBytes, body, fields, turn.promptIds, turn.promptBytes);
      const done = await sendTurn(options, turn, CHAT_PATH, request, (res) => {
        const scanned = scanReply(res.body, res.quotes);
        if (scanned.promptTokens !== undefined && scanned.promptTokens !== turn.promptIds.length)
          throw new EngineReplyError(
            `the engine ignored input_ids: it generated from ${JSON.stringify(scanned.promptTokens)} prompt tokens, ` +
              `not the ${turn.promptIds.length} sent (an SGLang whose chat route does not take input_ids re-renders messages); ` +
              "nothing was recorded. Use an SGLang whose ChatCompletionRequest has input_ids, or --engine-api sglang-generate",
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
      return turn.stream === true && done.ok ? streamWhole(done as EngineCompletion, turn.body) : done;
    },
    proxy: (req) => proxyToEngine(options, req),
    close: () => options.upstream.close(),
  };
}

/** A whole reply as the events of a stream: the message in one delta per part, the engine's finish reason and usage. */
export function streamWhole(completion: EngineCompletion, body: Record<string, unknown>): EngineStream {
  const reply = JSON.parse(Buffer.concat(completion.clientBody).toString("utf8")) as {
    id?: unknown;
    created?: unknown;
    model?: unknown;
    choices: [{ finish_reason?: unknown; matched_stop?: unknown }];
    usage?: Usage;
  };
  const chunks = new ChatChunks({
    id: typeof reply.id === "string" ? reply.id : "",
    created: typeof reply.created === "number" ? reply.created : Math.floor(Date.now() / 1000),
    model: typeof reply.model === "string" ? reply.model : "",
  });
  const message = completion.message;
  const delta: CompletionDelta = {
    reasoning: typeof message.reasoning_content === "string" ? message.reasoning_content : "",
    content: typeof message.content === "string" ? message.content : "",
    toolCalls: ((message.tool_calls ?? []) as ToolCall[]).map((call, index) => ({ ...call, index })),
  };
  const finish = reply.choices[0].finish_reason;
  // The reply's pooled buffers go back once: after the commit, or when the stream is dropped.
  let held = completion.release;
  const release = () => {
    const r = held;
    held = undefined;
    r?.();
  };
  async function* events(): AsyncGenerator<Buffer, EngineCompletion, undefined> {
    yield chunks.role();
    for (const event of chunks.delta(delta)) yield event;
    const matched = reply.choices[0].matched_stop;
    yield chunks.finish(
      typeof finish === "string" ? finish : "stop",
      typeof matched === "string" ? matched : undefined,
    );
    if (includeUsage(body) && reply.usage !== undefined) yield chunks.usage(reply.usage);
    return { ...completion, release, clientBody: [], headers: { ...SSE_HEADERS } };
  }
  return { ok: true, headers: { ...SSE_HEADERS }, events: events(), cancel: release };
}
