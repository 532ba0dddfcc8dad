// Reads SGLang's `/generate` stream (`stream: true`): one `data: {text, output_ids,
// meta_info}` event per step, `data: [DONE]` after the last. What a chunk carries depends on
// the server (python/sglang/srt/managers/tokenizer_manager.py, _handle_batch_output): by
// default `text`, `output_ids` and `meta_info.output_token_logprobs` hold everything so far
// (cumulative), and the last chunk, whose `meta_info.finish_reason` is set, is exactly the
// reply a `stream: false` request gets; started with `--incremental-streaming-output`,
// each chunk holds only what is new. `meta_info.completion_tokens` counts all tokens so far
// either way, which tells the two apart from the second chunk with tokens on. A failure is
// `data: {"error": {"message": …}}`, or a finish reason of type `abort`.
// Cumulative chunks repeat every entry so far, so only the first two are parsed for their
// entries: after that the text alone is read until the last chunk, which is taken whole.
// The record of the turn is the reply a `stream: false` request would have got: the last
// chunk as it came (cumulative), or the last chunk with the text, ids and entries put
// together (incremental), its routing payload left as it is.
import { JsonScanner } from "../buffers/json-scan.ts";
import { EngineReplyError } from "../sessions/errors.ts";
import { overflowOf } from "../sessions/budget.ts";
import { weightVersionOf } from "./reply-scan.ts";
import { abortOf, generateSpans, type GenerateSpans, type Span } from "./generate-spans.ts";
import type { TokenStep, TokenStreamReader, TokenStreamResult } from "./token-stream.ts";

function scanChunk(data: Buffer): { scan: JsonScanner; spans: GenerateSpans } {
  const scan = new JsonScanner(data, { invalid: (d) => EngineReplyError.notJson(`a /generate stream chunk: ${d}`) });
  return { scan, spans: generateSpans(scan).spans };
}

const idsOf = (entries: unknown[], from: number) =>
  entries.map((entry, i) => {
    const id = Array.isArray(entry) ? entry[1] : undefined;
    if (!Number.isInteger(id))
      throw new EngineReplyError(
        `the engine's output_token_logprobs[${from + i}] has no integer token id at position 1`,
      );
    return id as number;
  });

type Mode = "unknown" | "cumulative" | "incremental";

export class GenerateStreamReader implements TokenStreamReader {
  readonly #promptLength: number;
  // How text and ids come (told from the ids), and how the logprob entries come: SGLang
  // before PR #21583 (2026-03-28) sent new text and ids but every entry so far.
  #idsMode: Mode = "unknown";
  #entriesMode: Mode = "unknown";
  #text = "";
  #ids: number[] = [];
  #entries: string[] = []; // each chunk's entries as their JSON text, without the brackets (incremental)
  #last: Buffer | undefined;
  #lastSpans: GenerateSpans | undefined;
  #finish: "stop" | "length" = "stop";
  #matched: string | undefined; // meta_info.finish_reason.matched of the last chunk, when a stop string
  #version: string | undefined; // meta_info.weight_version of the last chunk

  constructor(promptLength: number) {
    this.#promptLength = promptLength;
  }

  read(data: Buffer): TokenStep {
    const { scan, spans } = scanChunk(data);
    if (spans.error) {
      const error = scan.parse(...spans.error) as { message?: unknown } | null;
      // SGLang refuses a prompt over its context length in the stream's first (and only) event.
      const overflow = typeof error?.message === "string" ? overflowOf(error.message) : undefined;
      if (overflow) throw overflow;
      throw new EngineReplyError(
        `the engine failed the generation: ${String(error?.message ?? JSON.stringify(error))}`,
      );
    }
    const finish = spans.finish
      ? (scan.parse(...spans.finish) as { type?: unknown; message?: unknown; matched?: unknown } | null)
      : null;
    abortOf(finish);
    const text = spans.text ? scan.parse(...spans.text) : undefined;
    if (typeof text !== "string") throw new EngineReplyError("a /generate stream chunk has no string `text`");
    const completion = spans.completion ? scan.parse(...spans.completion) : undefined;
    if (!Number.isInteger(completion))
      throw new EngineReplyError("a /generate stream chunk has no integer meta_info.completion_tokens");
    const prompt = spans.prompt ? scan.parse(...spans.prompt) : undefined;
    if (typeof prompt === "number" && prompt !== this.#promptLength)
      throw new EngineReplyError(
        `the engine generated from ${prompt} prompt tokens, not the ${this.#promptLength} input_ids sent`,
      );
    const last = finish !== null && finish !== undefined;
    const piece = this.#advance(scan, spans, text, completion as number, last);
    if (last) {
      this.#finish = finish.type === "length" ? "length" : "stop";
      if (typeof finish.matched === "string") this.#matched = finish.matched;
      if (spans.version) this.#version = weightVersionOf(scan.parse(...spans.version));
      this.#last = data;
      this.#lastSpans = spans;
    }
    return { text: piece, last };
  }

  /** Takes a chunk's new ids, entries and text; returns the new text. */
  #advance(scan: JsonScanner, spans: GenerateSpans, text: string, total: number, last: boolean): string {
    // Everything cumulative: only the text is read until the last chunk, which is the record.
    if (this.#idsMode === "cumulative" && this.#entriesMode === "cumulative" && !last) return this.#setText(text);
    const entries = this.#entriesOf(scan, spans);
    const outputIds = spans.outputIds ? scan.parse(...spans.outputIds) : undefined;
    const ids = Array.isArray(outputIds) ? outputIds : idsOf(entries, this.#ids.length);
    if (!ids.every((id) => Number.isInteger(id)))
      throw new EngineReplyError("a /generate stream chunk's output_ids is not a list of integer token ids");
    const seen = this.#ids.length;
    // The first chunk with tokens reads the same in every mode; the next one tells them apart,
    // the ids (and with them the text) and the entries each on their own.
    if (this.#idsMode === "unknown" && seen > 0) {
      this.#idsMode = ids.length === total ? "cumulative" : "incremental";
      this.#entriesMode = entries.length === total ? "cumulative" : "incremental";
    }
    const check = (what: string, n: number, mode: Mode) => {
      const have = mode === "incremental" ? seen + n : n;
      if (have !== total)
        throw new EngineReplyError(
          `engine stream length mismatch: ${mode === "incremental" ? `${seen} + ${n} new` : n} ${what} != meta_info.completion_tokens=${total}`,
        );
    };
    check("output ids", ids.length, this.#idsMode);
    check("output_token_logprobs", entries.length, this.#entriesMode);
    if (this.#entriesMode !== "cumulative") this.#keepEntries(scan, spans.logprobs!);
    if (this.#idsMode === "incremental") {
      this.#ids.push(...(ids as number[]));
      this.#text += text;
      return text;
    }
    this.#ids = ids as number[];
    return this.#setText(text);
  }
  #entriesOf(scan: JsonScanner, spans: GenerateSpans): unknown[] {
    if (!spans.logprobs)
      throw new EngineReplyError(
        "a /generate stream chunk has no meta_info.output_token_logprobs (was return_logprob honoured?)",
      );
    const entries = scan.parse(...spans.logprobs);
    if (!Array.isArray(entries))
      throw new EngineReplyError("the engine's meta_info.output_token_logprobs is not a list");
    return entries;
  }

  /** An incremental chunk's entries as their JSON text, for the record put together at the end. */
  #keepEntries(scan: JsonScanner, span: Span): void {
    const inner = scan.buf.toString(span[0] + 1, span[1] - 1).trim();
    if (inner !== "") this.#entries.push(inner);
  }

  #setText(text: string): string {
    // Cumulative: the new text is what extends the text so far (a stop string may be cut off at the end).
    const piece = text.startsWith(this.#text) ? text.slice(this.#text.length) : "";
    this.#text = text;
    return piece;
  }

  result(): TokenStreamResult {
    const last = this.#last!;
    const spans = this.#lastSpans!;
    if (this.#idsMode !== "incremental" && this.#entriesMode !== "incremental")
      return {
        text: this.#text,
        completionIds: this.#ids,
        finish: this.#finish,
        matchedStop: this.#matched,
        response: [last],
        engineWeightVersion: this.#version,
      };
    // Incremental: the last chunk with what came in pieces put together, the rest of its bytes as they came.
    const swaps: Array<[Span | undefined, string]> = [];
    if (this.#idsMode === "incremental")
      swaps.push([spans.text, JSON.stringify(this.#text)], [spans.outputIds, `[${this.#ids.join(",")}]`]);
    if (this.#entriesMode === "incremental") swaps.push([spans.logprobs, `[${this.#entries.join(",")}]`]);
    const parts: Buffer[] = [];
    let at = 0;
    for (const [span, value] of swaps
      .filter((s): s is [Span, string] => s[0] !== undefined)
      .sort((a, b) => a[0][0] - b[0][0])) {
      parts.push(last.subarray(at, span[0]), Buffer.from(value, "utf8"));
      at = span[1];
    }
    parts.push(last.subarray(at));
    return {
      text: this.#text,
      completionIds: this.#ids,
      finish: this.#finish,
      matchedStop: this.#matched,
      response: parts,
      engineWeightVersion: this.#version,
    };
  }
}
