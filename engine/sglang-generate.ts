// The `sglang-generate` engine API: stock SGLang's native `POST /generate` with the prompt
// as `input_ids`. The reply's `meta_info.output_token_logprobs` carries the generated ids
// (stop token included) and their logprobs, `text` the decoded completion; the server
// builds the OpenAI reply from them (token-reply.ts); `meta_info.weight_version`, when
// present, is the engine's own policy version. The reply can carry many MiB of
// routing replay, so it is scanned as bytes: only `text` and the few meta_info members a
// turn needs are parsed, and the routing payload stays in the record, never in the reply.
import type { Engine, EngineTurn, EngineTurnRequest } from "../sessions/engine-port.ts";
import { EngineReplyError, partialOfEntries } from "../sessions/errors.ts";
import { JsonScanner } from "../buffers/json-scan.ts";
import { proxyToEngine, sendTurn, type AdapterOptions } from "./adapter.ts";
import { servedModel } from "./served-model.ts";
import { optionalContextLength } from "./context-length.ts";
import { GenerateStreamReader } from "./generate-stream.ts";
import { abortOf, generateSpans } from "./generate-spans.ts";
import { tokenOutcome } from "./token-reply.ts";
import { weightVersionOf } from "./reply-scan.ts";
import { streamTurn } from "./token-stream.ts";
import { definedJson, readSampling, withIds } from "./token-request.ts";

const GENERATE_PATH = "/generate";

interface GenerateFacts {
  text: string;
  completionIds: number[];
  finish: "stop" | "length";
  /** meta_info.finish_reason.matched, when it is a stop string. */
  matchedStop?: string;
  promptTokens: number;
  /** meta_info.weight_version, when the engine reports its policy version. */
  weightVersion?: string;
}

/** The members of a /generate reply a turn needs, each checked; any failure is a 502. */
export function scanGenerateReply(body: readonly Buffer[], quotes?: readonly number[]): GenerateFacts {
  const scan = new JsonScanner(body, { invalid: EngineReplyError.notJson, quotes });
  const { spans, end } = generateSpans(scan);
  if (scan.ws(end) !== scan.buf.length) scan.fail("unexpected data after the JSON value", scan.ws(end));
  const finish = spans.finish ? (scan.parse(...spans.finish) as { type?: unknown; matched?: unknown } | null) : null;
  abortOf(finish, () => (spans.logprobs ? partialOfEntries(scan.parse(...spans.logprobs)) : undefined));
  const text = spans.text ? scan.parse(...spans.text) : undefined;
  if (typeof text !== "string") throw new EngineReplyError("the engine's /generate reply has no string `text`");
  if (!spans.logprobs)
    throw new EngineReplyError(
      "the engine's /generate reply has no meta_info.output_token_logprobs (was return_logprob honoured?)",
    );
  const entries = scan.parse(...spans.logprobs);
  if (!Array.isArray(entries)) throw new EngineReplyError("the engine's meta_info.output_token_logprobs is not a list");
  const completionIds = entries.map((entry: unknown, i) => {
    const id = Array.isArray(entry) ? entry[1] : undefined;
    if (!Number.isInteger(id))
      throw new EngineReplyError(`the engine's output_token_logprobs[${i}] has no integer token id at position 1`);
    return id as number;
  });
  const completionTokens = spans.completion ? scan.parse(...spans.completion) : undefined;
  if (completionTokens !== completionIds.length)
    throw new EngineReplyError(
      `engine reply length mismatch: len(output_token_logprobs)=${completionIds.length} != meta_info.completion_tokens=${JSON.stringify(completionTokens ?? null)}`,
    );
  const promptTokens = spans.prompt ? scan.parse(...spans.prompt) : undefined;
  return {
    text,
    completionIds,
    finish: finish?.type === "length" ? "length" : "stop",
    matchedStop: typeof finish?.matched === "string" ? finish.matched : undefined,
    promptTokens: typeof promptTokens === "number" ? promptTokens : -1,
    weightVersion: spans.version ? weightVersionOf(scan.parse(...spans.version)) : undefined,
  };
}

export function sglangGenerateEngine(options: AdapterOptions): Engine {
  return {
    api: "sglang-generate",
    contextLength: optionalContextLength(servedModel(options)),
    async generate(turn: EngineTurnRequest): Promise<EngineTurn> {
      const s = readSampling(turn.body, "sglang-generate", turn.samplingDefaults);
      const sampling = definedJson({
        temperature: s.temperature,
        top_p: s.top_p,
        top_k: s.top_k,
        min_p: s.min_p,
        // /generate's default is 128 new tokens; null means up to the context length, as a chat client expects.
        max_new_tokens: s.maxTokens ?? null,
        stop: s.stop,
        sampling_seed: s.seed,
        frequency_penalty: s.frequency_penalty,
        presence_penalty: s.presence_penalty,
        repetition_penalty: s.repetition_penalty,
        // json_object as SGLang's own chat route maps it: a schema of any object, not `{}` (any value).
        json_schema: s.jsonObject ? '{"type":"object"}' : s.jsonSchema && JSON.stringify(s.jsonSchema),
        // The completion text is parsed for tool calls and reasoning: keep the markers.
        skip_special_tokens: false,
        no_stop_trim: false,
      });
      // The cache salt goes in GenerateReqInput's `extra_key` (a string for a single request; SGLang
      // keys its prefix cache by it from PR #23300 on): python/sglang/srt/managers/io_struct.py @
      // 001067fffe33427bee0ed2f007fb7551a1d76b44. None: no field, the request as before.
      const salt = turn.cacheSalt === undefined ? "" : `,"extra_key":${JSON.stringify(turn.cacheSalt)}`;
      const rest = `{"sampling_params":${sampling},"return_logprob":true${options.routingReplay ? ',"return_routed_experts":true' : ""}${options.indexerReplay ? ',"return_indexer_topk":true' : ""}${salt},"stream":${turn.stream === true}}`;
      const request = withIds("input_ids", turn.promptBytes, rest);
      if (turn.stream === true)
        return streamTurn(
          options,
          turn,
          GENERATE_PATH,
          request,
          new GenerateStreamReader(turn.promptIds.length),
          s.stop,
        );
      return sendTurn(options, turn, GENERATE_PATH, request, (res) => {
        const facts = scanGenerateReply(res.body, res.quotes);
        if (facts.promptTokens !== -1 && facts.promptTokens !== turn.promptIds.length)
          throw new EngineReplyError(
            `the engine generated from ${facts.promptTokens} prompt tokens, not the ${turn.promptIds.length} input_ids sent`,
          );
        return { ...tokenOutcome(options, turn, facts), engineWeightVersion: facts.weightVersion };
      });
    },
    proxy: (req) => proxyToEngine(options, req),
    close: () => options.upstream.close(),
  };
}
