// The `sglang-generate` engine API: stock SGLang's native `POST /generate` with the prompt
// as `input_ids`. The reply's `meta_info.output_token_logprobs` carries the generated ids
// (stop token included) and their logprobs, `text` the decoded completion; the server
// builds the OpenAI reply from them (token-reply.ts); `meta_info.weight_version`, when
// present, is the engine's own policy version. The reply can carry many MiB of
// routing replay, so it is scanned as bytes: only `text` and the few meta_info members a
// turn needs are parsed, and the routing payload stays in the record, never in the reply.
import type { Engine, EngineTurn, EngineTurnRequest } from "../sessions/engine-port.ts";
import { EngineAbortedError, EngineReplyError } from "../sessions/errors.ts";
import { JsonScanner } from "../buffers/json-scan.ts";
import { proxyToEngine, sendTurn, type AdapterOptions } from "./adapter.ts";
import { GenerateStreamReader } from "./generate-stream.ts";
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

export type Span = [number, number];

/** Where the members we read sit in a /generate reply, or in one chunk of its stream (generate-stream.ts). */
export interface GenerateSpans {
  text?: Span;
  outputIds?: Span;
  error?: Span;
  logprobs?: Span;
  finish?: Span;
  prompt?: Span;
  completion?: Span;
  version?: Span;
}

/** Scans one /generate reply object (or stream chunk) for its members; `end` is where the object ends. */
export function generateSpans(scan: JsonScanner): { spans: GenerateSpans; end: number } {
  const spans: GenerateSpans = {};
  const take = (key: keyof GenerateSpans, start: number) => (spans[key] = [start, scan.skipValue(start)])[1];
  const start = scan.ws(0);
  if (scan.buf.at(start) !== 0x7b) scan.fail("expected a JSON object", start);
  const end = scan.members(start, (m) => {
    if (scan.keyIs(m, "text")) return take("text", m.valueStart);
    if (scan.keyIs(m, "output_ids")) return take("outputIds", m.valueStart);
    if (scan.keyIs(m, "error")) return take("error", m.valueStart);
    if (!scan.keyIs(m, "meta_info") || scan.buf.at(m.valueStart) !== 0x7b) return;
    return scan.members(m.valueStart, (mi) => {
      if (scan.keyIs(mi, "output_token_logprobs")) return take("logprobs", mi.valueStart);
      if (scan.keyIs(mi, "finish_reason")) return take("finish", mi.valueStart);
      if (scan.keyIs(mi, "prompt_tokens")) return take("prompt", mi.valueStart);
      if (scan.keyIs(mi, "completion_tokens")) return take("completion", mi.valueStart);
      if (scan.keyIs(mi, "weight_version")) return take("version", mi.valueStart);
    });
  });
  return { spans, end };
}

/**
 * Throws the engine's abort: SGLang ends an aborted request with meta_info.finish_reason
 * `{"type": "abort", "message", "status_code", "err_type"}` (FINISH_ABORT.to_json,
 * python/sglang/srt/managers/schedule_batch.py @ 000eaffacf048e51b64d4d72985ef8f0b7054b39),
 * in a 200 reply: the text so far is not a completion.
 */
export function abortOf(finish: { type?: unknown; message?: unknown } | null | undefined): void {
  if (finish?.type === "abort")
    throw new EngineAbortedError(`finish_reason abort: ${String(finish.message ?? "no reason given")}`);
}

/** The members of a /generate reply a turn needs, each checked; any failure is a 502. */
export function scanGenerateReply(body: readonly Buffer[], quotes?: readonly number[]): GenerateFacts {
  const scan = new JsonScanner(body, { invalid: EngineReplyError.notJson, quotes });
  const { spans, end } = generateSpans(scan);
  if (scan.ws(end) !== scan.buf.length) scan.fail("unexpected data after the JSON value", scan.ws(end));
  const finish = spans.finish ? (scan.parse(...spans.finish) as { type?: unknown; matched?: unknown } | null) : null;
  abortOf(finish);
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
      const rest = `{"sampling_params":${sampling},"return_logprob":true${options.routingReplay ? ',"return_routed_experts":true' : ""}${options.indexerReplay ? ',"return_indexer_topk":true' : ""},"stream":${turn.stream === true}}`;
      const request = withIds("input_ids", turn.promptText, rest);
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
