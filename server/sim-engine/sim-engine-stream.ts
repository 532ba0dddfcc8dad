// The simulated engine's streamed replies (`stream: true`) on its three routes, each in its
// engine's wire format, one chunk per generated token, paced at `tokenMs` per token:
// - SGLang `/generate` (tokenizer_manager.py): `data: {text, output_ids, meta_info}` per
//   token; by default every chunk holds everything so far (cumulative), and the last one,
//   with `meta_info.finish_reason` set, is the reply `stream: false` gets (routing payload
//   included); with `incremental` (`--incremental-streaming-output`) each holds only what is
//   new. A failure is `data: {"error": {"message": …}}`. Then `data: [DONE]`.
// - vLLM `/v1/completions` (completion/serving.py): `text_completion` chunks with the new
//   text, `token_ids` and logprobs of the new token, `prompt_token_ids` on the first, the
//   finish and stop reasons on the last; a usage chunk with no choices under
//   `stream_options.include_usage`; a failure is `data: {"error": {…}}`. Then `[DONE]`.
// - the patched SGLang chat route: `chat.completion.chunk`s (role, content deltas, the tool
//   call at the end, the finish reason), a usage chunk under `include_usage`, `[DONE]`.
// The text of each chunk is decoded incrementally and, as both engines do, never ends in an
// unfinished character: a token that ends inside one adds no text until the character is
// whole. SGLang streams text that a matched stop string later cuts off; vLLM holds back a
// tail that may still become one. `onChunk` runs before each chunk is sent (tests use it as
// a gate, and a throw as an engine failure midway).
import { setTimeout as sleep } from "node:timers/promises";
import type { TokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { RoutedExpertsPayload, responseChunks } from "./sim-engine-payload.ts";

/** The generation routes (sim-engine.ts's SimRoute). */
type Route = "/v1/chat/completions" | "/generate" | "/v1/completions";

export interface StreamPacing {
  /** Time per generated token (default 0: as fast as the socket takes them). */
  tokenMs: number;
  /** Awaited before chunk `index` (0-based, one per token) is sent; a throw fails the stream there. */
  onChunk?: (route: Route, index: number) => void | Promise<void>;
}

/** Decodes ids one by one into text pieces that never split a character (the engines' incremental detokenizer). */
export class IncrementalText {
  readonly #folder: TokenizerFolder;
  readonly #ids: number[] = [];
  #prefix = 0;
  #read = 0;
  text = "";

  constructor(folder: TokenizerFolder) {
    this.#folder = folder;
  }

  /** The text the next id adds ("" while a character is unfinished). */
  push(id: number): string {
    this.#ids.push(id);
    const decode = (ids: number[]) => (ids.length === 0 ? "" : this.#folder.decode(ids));
    const before = decode(this.#ids.slice(this.#prefix, this.#read));
    const after = decode(this.#ids.slice(this.#prefix));
    if (after.length <= before.length || after.endsWith("\uFFFD")) return "";
    this.#prefix = this.#read;
    this.#read = this.#ids.length;
    const piece = after.slice(before.length);
    this.text += piece;
    return piece;
  }
}

const sse = (value: unknown) => Buffer.from(`data: ${JSON.stringify(value)}\n\n`, "utf8");
const DONE = () => Buffer.from("data: [DONE]\n\n");

async function pace(pacing: StreamPacing, route: Route, index: number): Promise<void> {
  if (pacing.tokenMs > 0) await sleep(pacing.tokenMs);
  await pacing.onChunk?.(route, index);
}

export interface GenerateStreamInput {
  /** The `stream: false` reply object (generateResponse), its routing payload as the marker. */
  response: Record<string, unknown>;
  /** Whether special tokens are decoded (`skip_special_tokens: false`). */
  keepSpecial: boolean;
  incremental: boolean;
  /** Incremental text and ids, but every logprob entry so far (SGLang before PR #21583). */
  cumulativeLogprobs?: boolean;
  payload: RoutedExpertsPayload;
  routedBytes: number;
}

/** SGLang's `/generate` stream for a reply object. */
export async function* generateStream(
  folder: TokenizerFolder,
  input: GenerateStreamInput,
  pacing: StreamPacing,
): AsyncGenerator<Buffer, void, undefined> {
  const { response, incremental } = input;
  const ids = response.output_ids as number[];
  const meta = response.meta_info as Record<string, unknown>;
  const entries = (meta.output_token_logprobs as unknown[] | undefined) ?? undefined;
  const text = new IncrementalText(folder);
  let sentText = "";
  try {
    for (let k = 1; k <= Math.max(ids.length, 1); k++) {
      await pace(pacing, "/generate", k - 1);
      const id = ids[k - 1];
      if (id !== undefined && (input.keepSpecial || !folder.specialTokenIds.has(id))) text.push(id);
      const last = k >= ids.length;
      if (last) {
        const final = incremental
          ? {
              ...response,
              text: delta(sentText, response.text as string),
              output_ids: ids.slice(k - 1),
              meta_info: {
                ...meta,
                ...(entries && { output_token_logprobs: input.cumulativeLogprobs ? entries : entries.slice(k - 1) }),
              },
            }
          : response;
        yield Buffer.concat([
          Buffer.from("data: "),
          ...responseChunks(final, input.payload, input.routedBytes),
          Buffer.from("\n\n"),
        ]);
        break;
      }
      const from = incremental ? k - 1 : 0;
      const chunkMeta: Record<string, unknown> = { ...meta, finish_reason: null, completion_tokens: k };
      delete chunkMeta.routed_experts;
      if (entries) chunkMeta.output_token_logprobs = entries.slice(input.cumulativeLogprobs ? 0 : from, k);
      yield sse({
        text: incremental ? text.text.slice(sentText.length) : text.text,
        output_ids: ids.slice(from, k),
        meta_info: chunkMeta,
      });
      sentText = text.text;
    }
  } catch (err) {
    yield sse({ error: { message: (err as Error).message } });
  }
  yield DONE();
}

/** What extends `sent` in `final` ("" when the engine cut text it had sent). */
const delta = (sent: string, final: string) => (final.startsWith(sent) ? final.slice(sent.length) : "");

export interface CompletionsStreamInput {
  /** The `stream: false` reply object (completionsResponse). */
  response: Record<string, unknown>;
  promptIds: readonly number[];
  keepSpecial: boolean;
  stop: readonly string[];
  includeUsage: boolean;
}

/** vLLM's `/v1/completions` stream for a reply object. */
export async function* completionsStream(
  folder: TokenizerFolder,
  input: CompletionsStreamInput,
  pacing: StreamPacing,
): AsyncGenerator<Buffer, void, undefined> {
  const { response } = input;
  const choice = (response.choices as Record<string, unknown>[])[0]!;
  const withIds = choice.token_ids !== null;
  // Without token_ids (vLLM before 0.10.2) the ids are the logprob tokens' "token_id:N".
  const spelled = (choice.logprobs as { tokens?: string[] } | null)?.tokens?.map((t) => Number(t.split(":")[1]));
  const ids = (choice.token_ids as number[] | null) ?? spelled ?? [];
  const finalText = choice.text as string;
  const lp = choice.logprobs as Record<string, unknown[]> | null;
  const count = lp ? lp.token_logprobs!.length : ids.length;
  const hold = input.stop.reduce((n, s) => Math.max(n, s.length - 1), 0);
  const text = new IncrementalText(folder);
  const head = { id: response.id, object: "text_completion", created: response.created, model: response.model };
  let sent = "";
  try {
    for (let k = 1; k <= Math.max(count, 1); k++) {
      await pace(pacing, "/v1/completions", k - 1);
      const id = ids[k - 1];
      if (id !== undefined && (input.keepSpecial || !folder.specialTokenIds.has(id))) text.push(id);
      const last = k >= count;
      // The text so far as vLLM sends it: never past the final text, nor into a tail a stop string may still claim.
      let upTo = last ? finalText : commonPrefix(text.text, finalText);
      if (!last && hold > 0) upTo = upTo.slice(0, Math.max(sent.length, upTo.length - hold));
      const piece = upTo.slice(sent.length);
      yield sse({
        ...head,
        choices: [
          {
            index: 0,
            text: piece,
            logprobs: lp && {
              text_offset: [sent.length],
              token_logprobs: lp.token_logprobs!.slice(k - 1, k),
              tokens: lp.tokens!.slice(k - 1, k),
              top_logprobs: lp.top_logprobs!.slice(k - 1, k),
            },
            finish_reason: last ? choice.finish_reason : null,
            stop_reason: last ? choice.stop_reason : null,
            prompt_token_ids: k === 1 && withIds ? input.promptIds : null,
            token_ids: withIds ? ids.slice(k - 1, k) : null,
          },
        ],
      });
      sent = upTo;
    }
    if (input.includeUsage) {
      const { prompt_tokens, total_tokens, completion_tokens, prompt_tokens_details } = response.usage as Record<
        string,
        unknown
      >;
      const usage = {
        prompt_tokens,
        total_tokens,
        completion_tokens,
        ...(prompt_tokens_details ? { prompt_tokens_details } : {}),
      };
      yield sse({ ...head, choices: [], usage });
    }
  } catch (err) {
    const message = (err as Error).message;
    yield sse({ error: { message, type: "InternalServerError", param: null, code: 500 } });
  }
  yield DONE();
}

function commonPrefix(a: string, b: string): string {
  let i = 0;
  while (i < a.length && i < b.length && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return a.slice(0, i);
}

export interface ChatStreamInput {
  /** The `stream: false` reply object (responseObject). */
  response: Record<string, unknown>;
  completionIds: readonly number[];
  includeUsage: boolean;
}

/** The patched SGLang chat route's stream for a reply object. */
export async function* chatStream(
  folder: TokenizerFolder,
  input: ChatStreamInput,
  pacing: StreamPacing,
): AsyncGenerator<Buffer, void, undefined> {
  const { response } = input;
  const choice = (response.choices as Record<string, unknown>[])[0]!;
  const message = choice.message as {
    content: string;
    tool_calls?: Array<{ function: { name: string; arguments: string } }>;
  };
  const head = { id: response.id, object: "chat.completion.chunk", created: response.created, model: response.model };
  const chunk = (delta: Record<string, unknown>, finish: unknown = null) =>
    sse({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
  const ids = input.completionIds;
  const text = new IncrementalText(folder);
  let sent = "";
  try {
    yield chunk({ role: "assistant", content: "" });
    for (let k = 1; k <= ids.length; k++) {
      await pace(pacing, "/v1/chat/completions", k - 1);
      text.push(ids[k - 1]!);
      const upTo = commonPrefix(text.text, message.content);
      if (upTo.length > sent.length) yield chunk({ content: upTo.slice(sent.length) });
      sent = upTo;
    }
    if (message.content.length > sent.length) yield chunk({ content: message.content.slice(sent.length) });
    for (const [index, call] of (message.tool_calls ?? []).entries()) {
      const { function: fn, ...rest } = call;
      yield chunk({ tool_calls: [{ index, ...rest, function: { name: fn.name, arguments: "" } }] });
      yield chunk({ tool_calls: [{ index, function: { arguments: fn.arguments } }] });
    }
    const meta = choice.meta_info as { finish_reason?: { matched?: unknown } } | undefined;
    yield sse({
      ...head,
      choices: [
        {
          index: 0,
          delta: {},
          logprobs: null,
          finish_reason: choice.finish_reason,
          matched_stop: meta?.finish_reason?.matched ?? null,
        },
      ],
    });
    if (input.includeUsage) yield sse({ ...head, choices: [], usage: response.usage });
  } catch (err) {
    yield sse({
      error: { object: "error", message: (err as Error).message, type: "InternalServerError", param: null, code: 500 },
    });
  }
  yield DONE();
}
