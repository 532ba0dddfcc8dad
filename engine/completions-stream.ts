// Reads vLLM's `/v1/completions` stream (`stream: true`; vllm/entrypoints/openai/completion/
// serving.py, completion_stream_generator): one `data: {…"object":"text_completion"…}` event
// per step whose `choices[0]` holds only what is new — `text`, `token_ids` (with
// `return_token_ids`; the first chunk also carries `prompt_token_ids`), and the `logprobs`
// of the new tokens (`tokens` spelled `token_id:N` under `return_tokens_as_token_ids`,
// `text_offset` counted from the start of the completion text) — and `finish_reason` set on the
// last one; then a usage chunk with no choices when `stream_options.include_usage` asked for
// one (tito-server does not), and `data: [DONE]`. A failure midway is `data: {"error": {…}}`
// (older releases: a top-level `{"object": "error", "message": …}`), still followed by
// `[DONE]`. The record of the turn is the reply a `stream: false` request would have got,
// put together from the chunks. How a choice's generated ids are read (`token_ids`, else the
// `token_id:N` tokens) lives here, for both: vllm-completions.ts reads its replies with it.
import { EngineAbortedError, EngineReplyError, type PartialCompletion } from "../sessions/errors.ts";
import type { TokenStep, TokenStreamReader, TokenStreamResult } from "./token-stream.ts";

export interface CompletionChoice {
  text?: unknown;
  token_ids?: unknown;
  finish_reason?: unknown;
  stop_reason?: unknown;
  logprobs?: { tokens?: unknown; token_logprobs?: unknown } | null;
}

/**
 * Throws the engine's abort: vLLM's finish reasons are "stop", "length", "abort"
 * (RequestFinishedReason, vllm/v1/engine/__init__.py @ 0015f3f6a0e6ccca781c3f0b127101153c12ebbe);
 * an aborted choice is not a completion.
 */
export function abortOfChoice(choice: CompletionChoice, withPartial = false): void {
  if (choice.finish_reason !== "abort") return;
  throw new EngineAbortedError('finish_reason "abort"', withPartial ? partialOfChoice(choice) : undefined);
}

/** The ids and logprobs an aborted choice carries (vLLM keeps what was generated: vllm issue #22197). */
function partialOfChoice(choice: CompletionChoice): PartialCompletion | undefined {
  try {
    const ids = completionIdsOf(choice);
    const lp = choice.logprobs?.token_logprobs;
    if (!Array.isArray(lp) || lp.length !== ids.length) return undefined;
    return { ids, logprobs: lp.map((x) => (typeof x === "number" ? x : 0)) };
  } catch {
    return undefined;
  }
}

/** The ids vLLM generated: `token_ids`, else the "token_id:N" spellings of `logprobs.tokens`. */
export function completionIdsOf(choice: CompletionChoice): number[] {
  if (Array.isArray(choice.token_ids)) {
    if (!choice.token_ids.every((id) => Number.isInteger(id)))
      throw new EngineReplyError("the engine's choices[0].token_ids is not a list of integer token ids");
    return choice.token_ids as number[];
  }
  const tokens = choice.logprobs?.tokens;
  if (!Array.isArray(tokens))
    throw new EngineReplyError(
      "the engine's reply has neither choices[0].token_ids nor choices[0].logprobs.tokens: vLLM 0.10.2 or later returns token ids with return_token_ids",
    );
  return tokens.map((token: unknown, i) => {
    const m = typeof token === "string" ? /^token_id:(\d+)$/.exec(token) : null;
    if (m === null)
      throw new EngineReplyError(
        `the engine's choices[0].logprobs.tokens[${i}] is ${JSON.stringify(token)}, not "token_id:N" (was return_tokens_as_token_ids honoured?)`,
      );
    return Number(m[1]);
  });
}

interface Chunk {
  id?: unknown;
  created?: unknown;
  model?: unknown;
  object?: unknown;
  message?: unknown;
  error?: { message?: unknown } | null;
  choices?: unknown;
}

interface StreamChoice extends CompletionChoice {
  prompt_token_ids?: unknown;
  logprobs?: {
    tokens?: unknown;
    token_logprobs?: unknown;
    text_offset?: unknown;
    top_logprobs?: unknown;
  } | null;
}

const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);

export class CompletionsStreamReader implements TokenStreamReader {
  #head: { id: unknown; created: unknown; model: unknown } | undefined;
  #text = "";
  #ids: number[] = [];
  #promptIds: unknown = null;
  #withIds = false;
  #logprobs = {
    text_offset: [] as unknown[],
    token_logprobs: [] as unknown[],
    tokens: [] as unknown[],
    top_logprobs: [] as unknown[],
  };
  #withLogprobs = false;
  #finish: { reason: unknown; stop: unknown } | undefined;

  read(data: Buffer): TokenStep {
    let chunk: Chunk;
    try {
      chunk = JSON.parse(data.toString("utf8")) as Chunk;
    } catch (err) {
      throw EngineReplyError.notJson(`a /v1/completions stream chunk: ${(err as Error).message}`, { cause: err });
    }
    if (chunk.error !== undefined && chunk.error !== null)
      throw new EngineReplyError(
        `the engine failed the generation: ${String(chunk.error.message ?? JSON.stringify(chunk.error))}`,
      );
    if (chunk.object === "error")
      throw new EngineReplyError(`the engine failed the generation: ${String(chunk.message ?? JSON.stringify(chunk))}`);
    this.#head ??= { id: chunk.id, created: chunk.created, model: chunk.model };
    const choice = list(chunk.choices)[0] as StreamChoice | undefined;
    if (choice === undefined) return { text: "", last: false }; // the usage chunk
    abortOfChoice(choice);
    if (typeof choice.text !== "string")
      throw new EngineReplyError("a /v1/completions stream chunk's choices[0].text is not a string");
    const ids = completionIdsOf(choice);
    if (Array.isArray(choice.token_ids)) this.#withIds = true;
    if (Array.isArray(choice.prompt_token_ids)) this.#promptIds = choice.prompt_token_ids;
    const lp = choice.logprobs;
    if (lp !== null && lp !== undefined) {
      this.#withLogprobs = true;
      const logprobs = list(lp.token_logprobs);
      if (logprobs.length !== ids.length)
        throw new EngineReplyError(
          `engine stream length mismatch: ${ids.length} new token ids but ${logprobs.length} token_logprobs`,
        );
      const into = this.#logprobs;
      into.text_offset.push(...list(lp.text_offset));
      into.token_logprobs.push(...logprobs);
      into.tokens.push(...list(lp.tokens));
      into.top_logprobs.push(...list(lp.top_logprobs));
    }
    this.#ids.push(...ids);
    this.#text += choice.text;
    const last = choice.finish_reason !== null && choice.finish_reason !== undefined;
    if (last) this.#finish = { reason: choice.finish_reason, stop: choice.stop_reason ?? null };
    return { text: choice.text, last };
  }

  result(promptLength: number): TokenStreamResult {
    const finish = this.#finish!;
    const head = this.#head!;
    const completion = this.#ids.length;
    const reply = {
      id: head.id,
      object: "text_completion",
      created: head.created,
      model: head.model,
      choices: [
        {
          index: 0,
          text: this.#text,
          logprobs: this.#withLogprobs ? { ...this.#logprobs, text_offset: unstreamedOffsets(this.#logprobs) } : null,
          finish_reason: finish.reason,
          stop_reason: finish.stop,
          token_ids: this.#withIds ? this.#ids : null,
          prompt_logprobs: null,
          prompt_token_ids: this.#promptIds,
        },
      ],
      service_tier: null,
      system_fingerprint: null,
      usage: {
        prompt_tokens: promptLength,
        total_tokens: promptLength + completion,
        completion_tokens: completion,
        prompt_tokens_details: null,
      },
      kv_transfer_params: null,
    };
    return {
      text: this.#text,
      completionIds: this.#ids,
      finish: finish.reason === "length" ? "length" : "stop",
      matchedStop: typeof finish.stop === "string" ? finish.stop : undefined,
      response: [Buffer.from(JSON.stringify(reply), "utf8")],
    };
  }
}

/**
 * `text_offset` as a `stream: false` reply has it. vLLM counts a reply's offsets from 0, each
 * the one before plus the length of the token before (Python `len`: code points) — of the
 * "token_id:N" spelling under return_tokens_as_token_ids — but starts each streamed chunk at
 * the length of the text streamed so far (OpenAIServingCompletion._create_completion_logprobs
 * and its callers, vllm/entrypoints/openai/completion/serving.py @
 * cc139d8ea6ff4db984778a3e77e95e1d1c7f1362), so the chunks' offsets put together differ from
 * the reply's. Rebuilt from the tokens when each is a string; else kept as they came.
 */
function unstreamedOffsets(logprobs: { text_offset: unknown[]; tokens: unknown[] }): unknown[] {
  const tokens = logprobs.tokens;
  if (tokens.length !== logprobs.text_offset.length || !tokens.every((t) => typeof t === "string"))
    return logprobs.text_offset;
  const offsets: number[] = [];
  let at = 0;
  for (const token of tokens as string[]) {
    offsets.push(at);
    at += [...token].length;
  }
  return offsets;
}
