// The `vllm-completions` engine API: stock vLLM's OpenAI completions route with the prompt
// as a list of token ids. The generated ids come from `choices[0].token_ids`
// (`return_token_ids`, vLLM 0.10.2 and later) or, from an older vLLM, from the logprobs'
// `tokens` spelled "token_id:N" (`return_tokens_as_token_ids`); either way they are the
// ids the model sampled, its stop token included. vLLM replies carry no routing payload,
// so the reply is parsed whole. The server builds the OpenAI chat reply (token-reply.ts).
import type { Engine, EngineTurn, EngineTurnRequest } from "../sessions/engine-port.ts";
import { EngineReplyError, InvalidChatRequestError } from "../sessions/errors.ts";
import { proxyToEngine, sendTurn, type AdapterOptions } from "./adapter.ts";
import { servedModel } from "./served-model.ts";
import { requiredContextLength } from "./context-length.ts";
import {
  abortOfChoice,
  completionIdsOf,
  CompletionsStreamReader,
  type CompletionChoice,
} from "./completions-stream.ts";
import { tokenOutcome } from "./token-reply.ts";
import { streamTurn } from "./token-stream.ts";
import { definedJson, readSampling, withIds } from "./token-request.ts";

const COMPLETIONS_PATH = "/v1/completions";

export function parseCompletionsReply(body: readonly Buffer[]): {
  text: string;
  completionIds: number[];
  finish: "stop" | "length";
  matchedStop?: string;
} {
  let reply: { choices?: unknown };
  try {
    reply = JSON.parse(Buffer.concat(body).toString("utf8")) as { choices?: unknown };
  } catch (err) {
    throw EngineReplyError.notJson((err as Error).message, { cause: err });
  }
  const choice = Array.isArray(reply?.choices) ? (reply.choices[0] as CompletionChoice | undefined) : undefined;
  if (!choice || typeof choice !== "object") throw new EngineReplyError("the engine's reply has no choices[0]");
  if (typeof choice.text !== "string") throw new EngineReplyError("the engine's choices[0].text is not a string");
  abortOfChoice(choice, true);
  const completionIds = completionIdsOf(choice);
  const logprobs = choice.logprobs?.token_logprobs;
  if (Array.isArray(logprobs) && logprobs.length !== completionIds.length)
    throw new EngineReplyError(
      `engine reply length mismatch: ${completionIds.length} token ids but ${logprobs.length} token_logprobs`,
    );
  const finish = choice.finish_reason === "length" ? "length" : "stop";
  // vLLM names the stop string (or stop token id) that ended the completion in `stop_reason`.
  const matchedStop = typeof choice.stop_reason === "string" ? choice.stop_reason : undefined;
  return { text: choice.text, completionIds, finish, matchedStop };
}

/**
 * The completion's token limit: the client's, else what the context leaves after the prompt
 * (vLLM's own default is 16 tokens, and a null `max_tokens` is its 500 or, in newer
 * releases, 16 again: vLLM issue #19862).
 */
function maxTokensOf(clientMax: number | undefined, promptLength: number, maxModelLen: number | undefined): number {
  if (clientMax !== undefined) return clientMax;
  if (maxModelLen === undefined)
    throw new EngineReplyError(
      "the engine's GET /v1/models states no max_model_len for the served model, so a turn without max_tokens has no limit to send; set max_tokens",
    );
  const room = maxModelLen - promptLength;
  if (room < 1)
    throw new InvalidChatRequestError(
      `the prompt is ${promptLength} tokens and the engine's max_model_len is ${maxModelLen}: no room left for a completion (nothing was sent)`,
    );
  return room;
}

export function vllmCompletionsEngine(options: AdapterOptions): Engine {
  const served = servedModel(options);
  return {
    api: "vllm-completions",
    contextLength: requiredContextLength(served),
    async generate(turn: EngineTurnRequest): Promise<EngineTurn> {
      const s = readSampling(turn.body, "vllm-completions", turn.samplingDefaults);
      // vLLM answers 404 for a model it does not serve: the served name goes upstream, never the client's.
      const info = await served.info(turn.headers, turn.signal);
      const rest = definedJson({
        model: info.model,
        max_tokens: maxTokensOf(s.maxTokens, turn.promptIds.length, info.maxModelLen),
        temperature: s.temperature,
        top_p: s.top_p,
        top_k: s.top_k,
        min_p: s.min_p,
        stop: s.stop,
        seed: s.seed,
        frequency_penalty: s.frequency_penalty,
        presence_penalty: s.presence_penalty,
        repetition_penalty: s.repetition_penalty,
        // vLLM's own json_object (StructuredOutputsParams; completion/protocol.py maps response_format so).
        structured_outputs: s.jsonObject ? { json_object: true } : s.jsonSchema && { json: s.jsonSchema },
        // The sampled token's logprob per position (no alternatives), and the sampled ids.
        logprobs: 0,
        return_token_ids: true,
        return_tokens_as_token_ids: true,
        // The completion text is parsed for tool calls and reasoning: keep the markers.
        skip_special_tokens: false,
        stream: turn.stream === true,
        // CompletionRequest's `cache_salt` (a string of 1 to 1024 characters; vLLM PR #20981 added it
        // to /v1/completions): vllm/entrypoints/openai/completion/protocol.py @
        // 002032ee2b18e1f7bd924ec47b62504ba3866063. Undefined: no field.
        cache_salt: turn.cacheSalt,
      });
      const request = withIds("prompt", turn.promptBytes, rest);
      if (turn.stream === true)
        return streamTurn(options, turn, COMPLETIONS_PATH, request, new CompletionsStreamReader(), s.stop);
      const done = await sendTurn(options, turn, COMPLETIONS_PATH, request, (res) => {
        return tokenOutcome(options, turn, parseCompletionsReply(res.body));
      });
      // A 404 may be a model the engine no longer serves (restarted with another): read /v1/models again.
      if (!done.ok && done.status === 404) served.forget();
      return done;
    },
    proxy: (req) => proxyToEngine(options, req),
    close: () => options.upstream.close(),
  };
}
