// Validates an engine chat reply and builds the client copy without parsing the whole
// body (the checks and the client copy of docs/http.md, "Chat"). One structural pass over the bytes
// finds choices[0].message and choices[0].meta_info.{output_token_logprobs,
// completion_tokens, weight_version} (only those slices go through JSON.parse), the
// top-level metadata.weight_version (SGLang's OpenAI routes), and the spans of every
// choice's meta_info.routed_experts / indexer_topk, which the client copy leaves out.
// It never copies or re-serializes the body: it reads the chunks as received, and the
// client copy is a list of views into them.
import type { ChatMessage } from "../sessions/chat-template.ts";
import { EngineAbortedError, EngineReplyError, partialOfEntries } from "../sessions/errors.ts";
import { JsonScanner, type MemberSpan } from "../buffers/json-scan.ts";

/** Keys of `meta_info` that carry routing-replay (R3) payloads: kept in records, cut for clients. */
export const R3_KEYS = ["routed_experts", "indexer_topk"] as const;

export interface ScannedReply {
  /** choices[0].message, parsed. */
  message: ChatMessage;
  /** Token ids of the completion: the second element of each output_token_logprobs entry. */
  completionIds: number[];
  /** The logprob of each completion token (the first element of each entry). */
  completionLogprobs: number[];
  finishReason: unknown;
  /** choices[0].meta_info.prompt_tokens: how many prompt tokens the engine generated from, when it says. */
  promptTokens?: unknown;
  /** The body minus R3 payloads, as views into the original bytes, in order. */
  clientBody: Buffer[];
  /** Whether any R3 payload was cut out. */
  strippedR3: boolean;
  /** The engine's policy version: choices[0].meta_info.weight_version, else metadata.weight_version. */
  engineWeightVersion?: string;
}

/** An engine's `weight_version` value as text (SGLang sends a string; a number is taken too), else undefined. */
export function weightVersionOf(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  return undefined;
}

interface Edit {
  start: number;
  end: number;
  insert: Buffer[];
}

const COMMA = Buffer.from(",");

/** Cuts the R3 members out of one meta_info object, keeping every other member's bytes. */
function metaInfoEdit(scan: JsonScanner, members: MemberSpan[], r3: boolean[]): Edit | undefined {
  if (!r3.includes(true)) return undefined;
  const insert: Buffer[] = [];
  members.forEach((m, i) => {
    if (r3[i]) return;
    if (insert.length > 0) insert.push(COMMA);
    for (const v of scan.buf.views(m.keyStart, m.valueEnd)) insert.push(v);
  });
  return { start: members[0]!.keyStart, end: members[members.length - 1]!.valueEnd, insert };
}

interface FirstChoice {
  message?: [number, number];
  finishReason?: [number, number];
  logprobs?: [number, number];
  completionTokens?: [number, number];
  promptTokens?: [number, number];
  weightVersion?: [number, number];
  metaFinish?: [number, number];
}

function scanChoice(scan: JsonScanner, start: number, first: FirstChoice | undefined, edits: Edit[]): number | void {
  if (scan.buf.at(start) !== 0x7b) return;
  return scan.members(start, (m) => {
    if (first && scan.keyIs(m, "message")) {
      first.message = [m.valueStart, (m.valueEnd = scan.skipValue(m.valueStart))];
      return m.valueEnd;
    }
    if (first && scan.keyIs(m, "finish_reason")) {
      first.finishReason = [m.valueStart, (m.valueEnd = scan.skipValue(m.valueStart))];
      return m.valueEnd;
    }
    if (!scan.keyIs(m, "meta_info") || scan.buf.at(m.valueStart) !== 0x7b) return;
    const members: MemberSpan[] = [];
    const r3: boolean[] = [];
    const end = scan.members(m.valueStart, (inner) => {
      members.push(inner);
      r3.push(R3_KEYS.some((k) => scan.keyIs(inner, k)));
      if (first && scan.keyIs(inner, "output_token_logprobs")) {
        first.logprobs = [inner.valueStart, (inner.valueEnd = scan.skipValue(inner.valueStart))];
        return inner.valueEnd;
      }
      if (first && scan.keyIs(inner, "prompt_tokens")) {
        first.promptTokens = [inner.valueStart, (inner.valueEnd = scan.skipValue(inner.valueStart))];
        return inner.valueEnd;
      }
      if (first && scan.keyIs(inner, "completion_tokens")) {
        first.completionTokens = [inner.valueStart, (inner.valueEnd = scan.skipValue(inner.valueStart))];
        return inner.valueEnd;
      }
      if (first && scan.keyIs(inner, "finish_reason")) {
        first.metaFinish = [inner.valueStart, (inner.valueEnd = scan.skipValue(inner.valueStart))];
        return inner.valueEnd;
      }
      if (first && scan.keyIs(inner, "weight_version")) {
        first.weightVersion = [inner.valueStart, (inner.valueEnd = scan.skipValue(inner.valueStart))];
        return inner.valueEnd;
      }
    });
    const edit = metaInfoEdit(scan, members, r3);
    if (edit) edits.push(edit);
    return end;
  });
}

/**
 * Validates the reply (any failure is a 502 EngineReplyError) and builds the client copy.
 * `quotes`: the offsets of every '"' in the body, if the engine client indexed them.
 */
export function scanReply(body: Buffer | readonly Buffer[], quotes?: readonly number[]): ScannedReply {
  const scan = new JsonScanner(body, { invalid: EngineReplyError.notJson, quotes });
  const bytes = scan.buf;
  const start = scan.ws(0);
  if (bytes.at(start) !== 0x7b) scan.fail("expected a JSON object", start);
  let first: FirstChoice = {};
  let metadataVersion: [number, number] | undefined;
  const edits: Edit[] = [];
  const end = scan.members(start, (m) => {
    if (scan.keyIs(m, "metadata") && bytes.at(m.valueStart) === 0x7b)
      return scan.members(m.valueStart, (md) => {
        if (scan.keyIs(md, "weight_version"))
          return (metadataVersion = [md.valueStart, scan.skipValue(md.valueStart)])[1];
      });
    if (!scan.keyIs(m, "choices") || bytes.at(m.valueStart) !== 0x5b) return;
    // A repeated "choices" key: JSON.parse keeps the last one, so validation does too;
    // R3 payloads are cut from every copy, since the bytes of each reach the client.
    first = {};
    return scan.elements(m.valueStart, (i, s) => scanChoice(scan, s, i === 0 ? first : undefined, edits));
  });
  if (scan.ws(end) !== bytes.length) scan.fail("unexpected data after the JSON value", scan.ws(end));

  // An aborted generation (SGLang's chat route: finish_reason "abort", meta_info.finish_reason
  // {"type": "abort", …}) is no completion, whatever else the reply holds.
  const finishReason = first.finishReason ? scan.parse(...first.finishReason) : undefined;
  const metaFinish = first.metaFinish
    ? (scan.parse(...first.metaFinish) as { type?: unknown; message?: unknown })
    : undefined;
  if (finishReason === "abort" || metaFinish?.type === "abort")
    throw new EngineAbortedError(
      `finish_reason abort: ${String(metaFinish?.message ?? "no reason given")}`,
      first.logprobs && partialOfEntries(scan.parse(...first.logprobs)),
    );
  if (!first.message) throw new EngineReplyError("engine reply has no choices[0].message");
  const message = scan.parse(...first.message) as ChatMessage | null;
  if (!message || typeof message !== "object" || Array.isArray(message))
    throw new EngineReplyError("engine reply's choices[0].message is not an object");
  if (!first.logprobs)
    throw new EngineReplyError(
      "engine reply is missing choices[0].meta_info.output_token_logprobs (is return_meta_info/logprobs honoured?)",
    );
  if (message.content === null || message.content === undefined) {
    throw new EngineReplyError(
      "assistant message content is None in the engine reply (choices[0].message.content); the trajectory needs the generated text",
    );
  }
  const entries = scan.parse(...first.logprobs);
  if (!Array.isArray(entries))
    throw new EngineReplyError("engine reply's choices[0].meta_info.output_token_logprobs is not a list");
  const completionTokens = first.completionTokens ? scan.parse(...first.completionTokens) : undefined;
  if (entries.length !== completionTokens) {
    throw new EngineReplyError(
      `engine reply length mismatch: len(output_token_logprobs)=${entries.length} != meta_info.completion_tokens=${JSON.stringify(completionTokens ?? null)}`,
    );
  }
  const completionIds = new Array<number>(entries.length);
  const completionLogprobs = new Array<number>(entries.length);
  entries.forEach((entry: unknown, i) => {
    const pair = Array.isArray(entry) ? entry : [];
    const id = pair[1];
    if (!Number.isInteger(id))
      throw new EngineReplyError(`engine reply's output_token_logprobs[${i}] has no integer token id at position 1`);
    completionIds[i] = id;
    completionLogprobs[i] = typeof pair[0] === "number" ? pair[0] : 0;
  });

  const clientBody: Buffer[] = [];
  let cursor = 0;
  for (const edit of edits) {
    for (const v of bytes.views(cursor, edit.start)) clientBody.push(v);
    for (const v of edit.insert) clientBody.push(v);
    cursor = edit.end;
  }
  for (const v of bytes.views(cursor, bytes.length)) clientBody.push(v);
  return {
    message,
    completionIds,
    completionLogprobs,
    finishReason,
    promptTokens: first.promptTokens ? scan.parse(...first.promptTokens) : undefined,
    clientBody,
    strippedR3: edits.length > 0,
    engineWeightVersion: weightVersionOf(
      first.weightVersion ? scan.parse(...first.weightVersion) : metadataVersion && scan.parse(...metadataVersion),
    ),
  };
}
