// Reads back the parts of a stored record a training sample needs, without parsing the
// whole record: the number of `input_ids` in the request sent upstream, and from the
// engine's reply choices[0]'s output_token_logprobs, finish reason and the span of its
// base64 `meta_info.routed_experts`, decoded only on demand (it can be tens of MiB).
// It works on the chunks the record holds and never copies a reply into one buffer.
// It never validates a reply as a whole: the chat turn did that before recording it.
import type { ByteChunks } from "../../buffers/byte-chunks.ts";
import { EngineReplyError, SampleDataError } from "../errors.ts";
import { JsonScanner } from "../../buffers/json-scan.ts";

export interface ReplyFacts {
  completionIds: number[];
  logprobs: number[];
  /** choices[0].finish_reason, else meta_info.finish_reason.type, else null. */
  finishReason: string | null;
  /** Decodes choices[0].meta_info.routed_experts; undefined when the reply has none. */
  routedExperts?: () => Buffer;
}

type Span = [number, number];

/** How many elements the request's top-level `input_ids` list has (walked, not parsed). */
export function countInputIds(request: Buffer, turn: number): number {
  const scan = new JsonScanner(request, { invalid: EngineReplyError.notJson });
  let count = -1;
  scan.members(scan.ws(0), (m) => {
    if (!scan.keyIs(m, "input_ids")) return;
    let n = 0;
    const end = scan.elements(m.valueStart, () => void n++);
    count = n;
    return end;
  });
  if (count < 0) throw new SampleDataError(`record of turn ${turn} has no input_ids in its request`);
  return count;
}

export function scanReplyFacts(response: readonly Buffer[], turn: number): ReplyFacts {
  const scan = new JsonScanner(response, { invalid: EngineReplyError.notJson });
  const spans: { logprobs?: Span; finish?: Span; metaFinish?: Span; routed?: Span } = {};
  const take = (key: keyof typeof spans, start: number) => {
    const end = scan.skipValue(start);
    spans[key] = [start, end];
    return end;
  };
  scan.members(scan.ws(0), (m) => {
    if (!scan.keyIs(m, "choices")) return;
    return scan.elements(m.valueStart, (i, s) => {
      if (i !== 0 || scan.buf.at(s) !== 0x7b) return;
      return scan.members(s, (c) => {
        if (scan.keyIs(c, "finish_reason")) return take("finish", c.valueStart);
        if (!scan.keyIs(c, "meta_info") || scan.buf.at(c.valueStart) !== 0x7b) return;
        return scan.members(c.valueStart, (mi) => {
          if (scan.keyIs(mi, "output_token_logprobs")) return take("logprobs", mi.valueStart);
          if (scan.keyIs(mi, "finish_reason")) return take("metaFinish", mi.valueStart);
          if (scan.keyIs(mi, "routed_experts") && scan.buf.at(mi.valueStart) === 0x22)
            return take("routed", mi.valueStart);
        });
      });
    });
  });
  if (!spans.logprobs)
    throw new SampleDataError(`record of turn ${turn} has no choices[0].meta_info.output_token_logprobs`);
  const entries = scan.parse(...spans.logprobs) as unknown[];
  const completionIds: number[] = [];
  const logprobs: number[] = [];
  for (const entry of entries) {
    const pair = entry as unknown[];
    completionIds.push(pair[1] as number);
    logprobs.push(typeof pair[0] === "number" ? pair[0] : 0);
  }
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
    routedExperts: routed ? () => decodeBase64Span(scan.buf, routed[0] + 1, routed[1] - 1, turn) : undefined,
  };
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
