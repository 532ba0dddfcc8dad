// The `vllm-completions` engine API: stock vLLM's OpenAI completions route with the prompt
// as a list of token ids. The generated ids come from `choices[0].token_ids`
// (`return_token_ids`, vLLM 0.10.2 and later) or, from an older vLLM, from the logprobs'
// `tokens` spelled "token_id:N" (`return_tokens_as_token_ids`); either way they are the
// ids the model sampled, its stop token included. vLLM replies carry no routing payload,
// so the reply is parsed whole. The server builds the OpenAI chat reply (token-reply.ts).
import type { Engine, EngineTurn, EngineTurnRequest } from "../sessions/engine-port.ts";
import { EngineReplyError } from "../sessions/errors.ts";
import { proxyToEngine, sendTurn, type AdapterOptions } from "./adapter.ts";
import { completionIdsOf, CompletionsStreamReader, type CompletionChoice } from "./completions-stream.ts";
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

export function vllmCompletionsEngine(options: AdapterOptions): Engine {
  return {
    api: "vllm-completions",
    async generate(turn: EngineTurnRequest): Promise<EngineTurn> {
      const s = readSampling(turn.body, "vllm-completions");
      const model = typeof turn.body.model === "string" ? turn.body.model : "";
      const rest = definedJson({
        model: model === "" ? undefined : model,
        // vLLM's completions default is 16 tokens; null means up to the context length, as a chat client expects.
        max_tokens: s.maxTokens ?? null,
        temperature: s.temperature,
        top_p: s.top_p,
        top_k: s.top_k,
        min_p: s.min_p,
        stop: s.stop,
        seed: s.seed,
        frequency_penalty: s.frequency_penalty,
        presence_penalty: s.presence_penalty,
        repetition_penalty: s.repetition_penalty,
        structured_outputs: s.jsonSchema === undefined ? undefined : { json: s.jsonSchema },
        // The sampled token's logprob per position (no alternatives), and the sampled ids.
        logprobs: 0,
        return_token_ids: true,
        return_tokens_as_token_ids: true,
        // The completion text is parsed for tool calls and reasoning: keep the markers.
        skip_special_tokens: false,
        stream: turn.stream === true,
      });
      const request = withIds("prompt", turn.promptText, rest);
      if (turn.stream === true)
        return streamTurn(options, turn, COMPLETIONS_PATH, request, new CompletionsStreamReader(), s.stop);
      return sendTurn(options, turn, COMPLETIONS_PATH, request, (res) => {
        return tokenOutcome(options, turn, parseCompletionsReply(res.body));
      });
    },
    proxy: (req) => proxyToEngine(options, req),
    close: () => options.upstream.close(),
  };
}
