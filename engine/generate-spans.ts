// Where the members the server reads sit in one SGLang `/generate` reply object: the whole
// reply (sglang-generate.ts) or one chunk of its stream (generate-stream.ts). Both readers
// use it, so it is a module of its own, imported by each and importing neither.
import type { JsonScanner } from "../buffers/json-scan.ts";
import { EngineAbortedError, type PartialCompletion } from "../sessions/errors.ts";

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
 * in a 200 reply: the text so far is not a completion. `partial` reads what was generated
 * (output_token_logprobs holds it since sglang#11673), for a turn that resumes.
 */
export function abortOf(
  finish: { type?: unknown; message?: unknown } | null | undefined,
  partial?: () => PartialCompletion | undefined,
): void {
  if (finish?.type === "abort")
    throw new EngineAbortedError(`finish_reason abort: ${String(finish.message ?? "no reason given")}`, partial?.());
}
