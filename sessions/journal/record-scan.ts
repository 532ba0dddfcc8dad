// Reads back the parts of a stored record a training sample needs, without parsing the
// whole record: how many prompt ids the request sent upstream had, and from the engine's
// reply the completion ids, their logprobs, the finish reason and the span of the base64
// routed experts, decoded only on demand (it can be tens of MiB). Records come in one shape
// per engine API: SGLang's chat route (ids in `input_ids`; facts in `choices[0]` and its
// `meta_info`), SGLang's `/generate` (`input_ids`; `meta_info` at the top level) and vLLM's
// `/v1/completions` (ids in `prompt`; `choices[0].token_ids` and `.logprobs`). One walk
// reads any of them. It works on the chunks the record holds and never copies a reply into
// one buffer. It never validates a reply as a whole: the chat turn did that before
// recording it.
import type { ByteChunks } from "../../buffers/byte-chunks.ts";
import { EngineReplyError, SampleDataError } from "../errors.ts";
import { isNpy, npyToInt32 } from "./npy.ts";
import { JsonScanner, type MemberSpan } from "../../buffers/json-scan.ts";

export interface ReplyFacts {
  completionIds: number[];
  logprobs: number[];
  /** choices[0].finish_reason, else meta_info.finish_reason.type, else null. */
  finishReason: string | null;
  /** Decodes meta_info.routed_experts; undefined when the reply has none. */
  routedExperts?: () => Buffer;
}

type Span = [number, number];

/**
 * How many prompt ids the request sent upstream has (walked, not parsed): its top-level
 * `input_ids` (SGLang), else its `prompt` when that is a list (vLLM takes the ids there).
 */
export function countInputIds(request: Buffer, turn: number): number {
  const scan = new JsonScanner(request, { invalid: EngineReplyError.notJson });
  let inputIds = -1;
  let prompt = -1;
  let promptText = false;
  const count = (start: number, set: (n: number) => void) => {
    let n = 0;
    const end = scan.elements(start, () => void n++);
    set(n);
    return end;
  };
  scan.members(scan.ws(0), (m) => {
    if (scan.keyIs(m, "input_ids")) return count(m.valueStart, (n) => (inputIds = n));
    if (!scan.keyIs(m, "prompt")) return;
    if (scan.buf.at(m.valueStart) === 0x5b) return count(m.valueStart, (n) => (prompt = n));
    promptText = true;
  });
  if (inputIds >= 0) return inputIds;
  if (prompt >= 0) return prompt;
  throw new SampleDataError(
    promptText
      ? `record of turn ${turn} has a text prompt in its request, not token ids (no input_ids, prompt is not a list)`
      : `record of turn ${turn} has no prompt ids in its request (neither input_ids nor a prompt list)`,
  );
}

interface ReplySpans {
  /** meta_info.output_token_logprobs (SGLang, in choices[0] or at the top level). */
  logprobs?: Span;
  /** choices[0].finish_reason */
  finish?: Span;
  /** meta_info.finish_reason */
  metaFinish?: Span;
  routed?: Span;
  /** choices[0].token_ids (vLLM) */
  tokenIds?: Span;
  /** choices[0].logprobs.token_logprobs (vLLM) */
  tokenLogprobs?: Span;
  /** choices[0].logprobs.tokens (vLLM: "token_id:N" under return_tokens_as_token_ids) */
  tokens?: Span;
}

export function scanReplyFacts(response: readonly Buffer[], turn: number): ReplyFacts {
  const scan = new JsonScanner(response, { invalid: EngineReplyError.notJson });
  const spans: ReplySpans = {};
  const take = (key: keyof ReplySpans, start: number) => {
    const end = scan.skipValue(start);
    spans[key] = [start, end];
    return end;
  };
  const isObject = (m: MemberSpan) => scan.buf.at(m.valueStart) === 0x7b;
  const metaInfo = (m: MemberSpan) =>
    scan.members(m.valueStart, (mi) => {
      if (scan.keyIs(mi, "output_token_logprobs")) return take("logprobs", mi.valueStart);
      if (scan.keyIs(mi, "finish_reason")) return take("metaFinish", mi.valueStart);
      if (scan.keyIs(mi, "routed_experts") && scan.buf.at(mi.valueStart) === 0x22) return take("routed", mi.valueStart);
    });
  scan.members(scan.ws(0), (m) => {
    if (scan.keyIs(m, "meta_info") && isObject(m)) return metaInfo(m);
    if (!scan.keyIs(m, "choices")) return;
    return scan.elements(m.valueStart, (i, s) => {
      if (i !== 0 || scan.buf.at(s) !== 0x7b) return;
      return scan.members(s, (c) => {
        if (scan.keyIs(c, "finish_reason")) return take("finish", c.valueStart);
        if (scan.keyIs(c, "meta_info") && isObject(c)) return metaInfo(c);
        if (scan.keyIs(c, "token_ids")) return take("tokenIds", c.valueStart);
        // vLLM's routed experts (an .npy file in base64: npy.ts), beside the choice's text.
        if (scan.keyIs(c, "routed_experts") && scan.buf.at(c.valueStart) === 0x22) return take("routed", c.valueStart);
        if (!scan.keyIs(c, "logprobs") || !isObject(c)) return;
        return scan.members(c.valueStart, (lp) => {
          if (scan.keyIs(lp, "token_logprobs")) return take("tokenLogprobs", lp.valueStart);
          if (scan.keyIs(lp, "tokens")) return take("tokens", lp.valueStart);
        });
      });
    });
  });
  const { completionIds, logprobs } = spans.logprobs
    ? sglangOutput(scan, spans.logprobs)
    : vllmOutput(scan, spans, turn);
  let finishReason: string | null = null;
  const finish = spans.finish ? scan.parse(...spans.finish) : null;
  if (typeof finish === "string") finishReason = finish;
  else if (spans.metaFinish) {
    const meta = scan.parse(...spans.metaFinish) as { type?: unknown } | null;
    if (meta && typeof meta.type === "string") finishReason = meta.type;
  }
  const routed = spans.routed;
  return {
    completionIds,
    logprobs,
    finishReason,
    routedExperts: routed
      ? () => {
          const bytes = decodeBase64Span(scan.buf, routed[0] + 1, routed[1] - 1, turn);
          return isNpy(bytes) ? npyToInt32(bytes, turn) : bytes;
        }
      : undefined,
  };
}

/** SGLang: `[[logprob, id, text], …]`; a null logprob counts as 0. */
function sglangOutput(scan: JsonScanner, span: Span): { completionIds: number[]; logprobs: number[] } {
  const entries = scan.parse(...span) as unknown[];
  const completionIds: number[] = [];
  const logprobs: number[] = [];
  for (const entry of entries) {
    const pair = entry as unknown[];
    completionIds.push(pair[1] as number);
    logprobs.push(typeof pair[0] === "number" ? pair[0] : 0);
  }
  return { completionIds, logprobs };
}

/**
 * vLLM: the ids (`token_ids`, or from a vLLM before 0.10.2 or a streamed record whose
 * `token_ids` is null, the "token_id:N" spellings of `logprobs.tokens`) and their logprobs
 * in parallel lists; a null logprob counts as 0.
 */
function vllmOutput(
  scan: JsonScanner,
  spans: ReplySpans,
  turn: number,
): { completionIds: number[]; logprobs: number[] } {
  const listed = spans.tokenIds ? scan.parse(...spans.tokenIds) : null;
  const spelled = listed === null && spans.tokens ? tokenIdsOf(scan.parse(...spans.tokens), turn) : undefined;
  if (listed === null && spelled === undefined)
    throw new SampleDataError(
      `record of turn ${turn} has no completion ids in its reply: no meta_info.output_token_logprobs (SGLang chat or /generate), no choices[0].token_ids and no "token_id:N" choices[0].logprobs.tokens (vLLM completions)`,
    );
  const lps = spans.tokenLogprobs;
  if (!lps)
    throw new SampleDataError(
      `record of turn ${turn} has completion ids but no choices[0].logprobs.token_logprobs in its reply`,
    );
  const completionIds = spelled ?? listed;
  const values = scan.parse(...lps);
  if (!Array.isArray(completionIds) || !completionIds.every(Number.isInteger))
    throw new SampleDataError(`record of turn ${turn}: choices[0].token_ids is not a list of token ids`);
  if (!Array.isArray(values) || values.length !== completionIds.length)
    throw new SampleDataError(
      `record of turn ${turn}: choices[0].logprobs.token_logprobs is not a list of ${completionIds.length} logprobs, one per token id`,
    );
  return { completionIds, logprobs: values.map((v) => (typeof v === "number" ? v : 0)) };
}

/** vLLM's `return_tokens_as_token_ids` spellings ("token_id:N") as ids. */
function tokenIdsOf(tokens: unknown, turn: number): number[] {
  if (!Array.isArray(tokens))
    throw new SampleDataError(`record of turn ${turn}: choices[0].logprobs.tokens is not a list`);
  return tokens.map((t, i) => {
    const m = typeof t === "string" ? /^token_id:(\d+)$/.exec(t) : null;
    if (m === null)
      throw new SampleDataError(
        `record of turn ${turn}: choices[0].logprobs.tokens[${i}] is ${JSON.stringify(t)}, not "token_id:N"`,
      );
    return Number(m[1]);
  });
}

/** Base64 text at [start, end) of the chunks, decoded piece by piece into one aligned buffer. */
function decodeBase64Span(buf: ByteChunks, start: number, end: number, turn: number): Buffer {
  const views = buf.views(start, end);
  // JSON may escape characters ("\/"); then the string goes through JSON.parse first.
  if (views.some((v) => v.includes(0x5c))) {
    const decoded = Buffer.from(JSON.parse(`"${buf.toString(start, end)}"`) as string, "base64");
    return Buffer.from(decoded.buffer.slice(decoded.byteOffset, decoded.byteOffset + decoded.length));
  }
  const chars = end - start;
  let pad = 0;
  while (pad < 2 && pad < chars && buf.at(end - 1 - pad) === 0x3d) pad++;
  const size = Math.floor((chars * 3) / 4) - pad;
  // Its own ArrayBuffer: an Int32Array view over it is aligned.
  const out = Buffer.from(new ArrayBuffer(size));
  let written = 0;
  let carry = "";
  for (const v of views) {
    const text = carry + v.toString("latin1");
    const whole = text.length - (text.length % 4);
    written += out.write(text.slice(0, whole), written, "base64");
    carry = text.slice(whole);
  }
  if (carry) written += out.write(carry, written, "base64");
  if (written !== size) throw new SampleDataError(`record of turn ${turn}: routed_experts is not valid base64`);
  return out;
}
