// Stock SGLang's native `POST /generate`, one non-streaming request: the request fields
// the simulated engine reads and the reply object, shaped as SGLang's tokenizer manager
// builds it: `{text, output_ids, meta_info}`. `output_ids` and `output_token_logprobs`
// hold every generated id, the stop token included; `text` leaves a matched stop token or
// stop string out (SGLang's detokenizer trims it unless `no_stop_trim`). SGLang checks
// `max_new_tokens` before the stop token, so a stop token on the last allowed position
// ends as `length`. Missing `max_new_tokens` means SGLang's default of 128.
// It never touches HTTP; sampling fields (temperature, top_p, penalties, seed) are
// accepted and ignored, since the sim is deterministic.
import { randomUUID } from "node:crypto";
import type { TokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { ROUTED_EXPERTS_MARKER, logprobAt } from "./sim-engine-reply.ts";
import {
  BadRequest,
  alternatives,
  generate,
  promptIdsOf,
  reportedText,
  stopList,
  type Completion,
} from "./sim-engine-completion.ts";

/** SGLang's default `max_new_tokens` when the request has none. */
export const SGLANG_DEFAULT_MAX_NEW_TOKENS = 128;

export interface GenerateBody {
  text?: unknown;
  input_ids?: unknown;
  sampling_params?: Record<string, unknown> | null;
  return_logprob?: boolean | null;
  top_logprobs_num?: number | null;
  return_routed_experts?: boolean | null;
  stream?: boolean | null;
  rid?: string | null;
}

const nullable = (type: string) => ({ type: [type, "null"] });

export const generateSchema = {
  body: {
    type: "object",
    properties: {
      // A list of ints, or a list of lists (a batch, refused); `text` is a string or a
      // batch. Both are checked when read (a union type here would need a looser Ajv).
      input_ids: nullable("array"),
      sampling_params: {
        ...nullable("object"),
        properties: {
          max_new_tokens: { ...nullable("integer"), minimum: 0 },
          stop_token_ids: { ...nullable("array"), items: { type: "integer", minimum: 0 } },
          skip_special_tokens: nullable("boolean"),
          no_stop_trim: nullable("boolean"),
          json_schema: nullable("string"),
          n: { ...nullable("integer"), minimum: 1 },
        },
      },
      return_logprob: nullable("boolean"),
      top_logprobs_num: { ...nullable("integer"), minimum: 0 },
      return_routed_experts: nullable("boolean"),
      stream: nullable("boolean"),
      rid: nullable("string"),
    },
  },
};

function schemaOf(jsonSchema: unknown): unknown {
  if (typeof jsonSchema !== "string") return undefined;
  try {
    return JSON.parse(jsonSchema);
  } catch (err) {
    throw new BadRequest(`sampling_params.json_schema is not valid JSON: ${(err as Error).message}`);
  }
}

function finishReason(completion: Completion, maxTokens: number | undefined): Record<string, unknown> {
  const { finish } = completion;
  switch (finish.type) {
    case "eos":
    case "stop_token":
      return { type: "stop", matched: finish.id };
    case "stop_str":
      return { type: "stop", matched: finish.matched };
    case "length":
      return { type: "length", length: maxTokens ?? completion.ids.length };
  }
}

/** `[logprob, token_id, text]` as SGLang writes it when `return_text_in_logprobs` is off. */
const entry = (logprob: number, id: number) => [logprob, id, null];

/** The prompt ids and generated completion of a /generate request (what the route decides on). */
export function runGenerate(
  folder: TokenizerFolder,
  body: GenerateBody,
  reasoning: boolean,
  stopId?: number,
): { promptIds: number[]; completion: Completion; maxTokens: number | undefined } {
  const sp = body.sampling_params ?? {};
  if ((sp.n ?? 1) !== 1) throw new BadRequest("sampling_params.n > 1 is not supported by the simulated engine");
  const promptIds = promptIdsOf(folder, body.input_ids ?? body.text, "`input_ids` or `text`");
  // Absent: SGLang's default; an explicit null: no cap but the context.
  const maxTokens =
    "max_new_tokens" in sp ? ((sp.max_new_tokens as number | null) ?? undefined) : SGLANG_DEFAULT_MAX_NEW_TOKENS;
  const completion = generate(
    folder,
    promptIds,
    {
      maxTokens,
      stop: stopList(sp.stop, "sampling_params.stop"),
      stopTokenIds: new Set((sp.stop_token_ids as number[] | null) ?? []),
      schema: schemaOf(sp.json_schema),
      lengthFirst: true,
    },
    reasoning,
    stopId,
  );
  return { promptIds, completion, maxTokens };
}

/** The /generate reply object; `routed_experts`, when wanted, holds the marker the payload replaces. */
export function generateResponse(
  folder: TokenizerFolder,
  body: GenerateBody,
  options: { reasoning: boolean; withRoutedExperts: boolean; stopId?: number },
): Record<string, unknown> {
  const { promptIds, completion, maxTokens } = runGenerate(folder, body, options.reasoning, options.stopId);
  const sp = body.sampling_params ?? {};
  const ids = completion.ids;
  const meta: Record<string, unknown> = {
    id: typeof body.rid === "string" ? body.rid : randomUUID().replace(/-/g, ""),
    finish_reason: finishReason(completion, maxTokens),
    prompt_tokens: promptIds.length,
  };
  if (body.return_logprob) {
    const logprobs = ids.map((id, i) => logprobAt(id, (completion.offset ?? 0) + i));
    // Prompt logprobs start at logprob_start_len; its default leaves none.
    meta.input_token_logprobs = [];
    meta.output_token_logprobs = ids.map((id, i) => entry(logprobs[i], id));
    const k = body.top_logprobs_num ?? 0;
    if (k > 0) {
      meta.input_top_logprobs = [];
      meta.output_top_logprobs = ids.map((id, i) => [
        entry(logprobs[i], id),
        ...alternatives(id, logprobs[i], k - 1).map(([alt, lp]) => entry(lp, alt)),
      ]);
    }
  }
  meta.completion_tokens = ids.length;
  meta.cached_tokens = 0;
  if (options.withRoutedExperts) meta.routed_experts = ROUTED_EXPERTS_MARKER;
  const text = reportedText(folder, completion, sp.skip_special_tokens !== false, sp.no_stop_trim === true);
  return { text, output_ids: ids, meta_info: meta };
}

/** SGLang's error body for a refused /generate request. */
export const generateError = (message: string) => ({ error: { message } });
