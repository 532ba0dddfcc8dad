// Stock vLLM's OpenAI completions API, `POST /v1/completions` with a token-id prompt, one
// non-streaming request, as vLLM >= 0.10.2 answers it: a `text_completion` whose choice
// carries `token_ids` and `prompt_token_ids` under `return_token_ids`, and the legacy
// `logprobs` object (`tokens` as `token_id:N` under `return_tokens_as_token_ids`).
// `token_ids` and the logprobs hold every generated id, the stop token included; `text`
// leaves the stop token and a matched stop string out unless
// `include_stop_str_in_output`. The tokenizer's eos ends with `stop_reason: null`; a
// `stop_token_ids` entry or a stop string is named in `stop_reason`. vLLM checks the stop
// token before `max_tokens`, and defaults an absent `max_tokens` to 16 (null: no limit but the
// completion's own length).
// It never touches HTTP; sampling fields (temperature, seed, penalties) are accepted and
// ignored, since the sim is deterministic.
import { randomUUID } from "node:crypto";
import type { TokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { logprobAt } from "./sim-engine-reply.ts";
import {
  BadRequest,
  alternatives,
  generate,
  promptIdsOf,
  reportedText,
  stopList,
  type Completion,
} from "./sim-engine-completion.ts";

/** vLLM's default `max_tokens` for completions when the request has none (null means up to the context length). */
export const VLLM_DEFAULT_MAX_TOKENS = 16;

export interface CompletionsBody {
  model?: string | null;
  prompt?: unknown;
  max_tokens?: number | null;
  logprobs?: number | null;
  n?: number | null;
  echo?: boolean | null;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean | null } | null;
  stop?: unknown;
  stop_token_ids?: number[] | null;
  include_stop_str_in_output?: boolean | null;
  skip_special_tokens?: boolean | null;
  return_token_ids?: boolean | null;
  return_tokens_as_token_ids?: boolean | null;
  structured_outputs?: Record<string, unknown> | null;
  response_format?: { type?: string; json_schema?: { schema?: unknown } | null } | null;
}

const nullable = (type: string) => ({ type: [type, "null"] });

export const completionsSchema = {
  body: {
    type: "object",
    properties: {
      model: nullable("string"),
      // `prompt` (a list of ints, a string, or a batch) and `stop` (a string or a list)
      // are checked when read: a union type here would need a looser Ajv.
      max_tokens: { ...nullable("integer"), minimum: 0 },
      logprobs: { ...nullable("integer"), minimum: -1 },
      n: { ...nullable("integer"), minimum: 1 },
      echo: nullable("boolean"),
      stream: nullable("boolean"),
      stop_token_ids: { ...nullable("array"), items: { type: "integer", minimum: 0 } },
      include_stop_str_in_output: nullable("boolean"),
      skip_special_tokens: nullable("boolean"),
      return_token_ids: nullable("boolean"),
      return_tokens_as_token_ids: nullable("boolean"),
      structured_outputs: nullable("object"),
      response_format: nullable("object"),
    },
  },
};

function parsed(value: unknown, field: string): unknown {
  if (typeof value !== "string") return value;
  try {
    return JSON.parse(value);
  } catch (err) {
    throw new BadRequest(`${field} is not valid JSON: ${(err as Error).message}`);
  }
}

/** The JSON schema the completion must fit: `structured_outputs.json` (vLLM's current field) or `response_format`. */
function schemaOf(body: CompletionsBody): unknown {
  const json = body.structured_outputs?.json;
  if (json !== undefined && json !== null) return parsed(json, "structured_outputs.json");
  const format = body.response_format;
  if (format?.type === "json_schema") return format.json_schema?.schema ?? { type: "object" };
  if (format?.type === "json_object") return { type: "object" };
  return undefined;
}

function stopReason(completion: Completion): number | string | null {
  const { finish } = completion;
  if (finish.type === "stop_token") return finish.id;
  if (finish.type === "stop_str") return finish.matched;
  return null;
}

/**
 * What vLLM refuses before generating: a `model` it does not serve (404 "The model `m` does
 * not exist.": OpenAIServing._check_model, vllm/entrypoints/openai/engine/serving.py @
 * 619e4b31da7791a6ea4f6724fe45b54556b5a8fa; an absent model is the served one), and a
 * prompt plus max_tokens beyond the context length (400).
 */
export function checkCompletions(
  body: CompletionsBody,
  served: { model: string; maxModelLen: number; nullMaxTokens: "500" | "16" },
): void {
  if (typeof body.model === "string" && body.model !== served.model)
    throw Object.assign(new Error(`The model \`${body.model}\` does not exist.`), { statusCode: 404 });
  if (body.max_tokens === null && served.nullMaxTokens === "16") body.max_tokens = VLLM_DEFAULT_MAX_TOKENS;
  const promptLength = Array.isArray(body.prompt) && body.prompt.every(Number.isInteger) ? body.prompt.length : 0;
  const want = body.max_tokens ?? VLLM_DEFAULT_MAX_TOKENS;
  if (promptLength + (body.max_tokens === null ? 0 : want) > served.maxModelLen)
    throw new BadRequest(
      `This model's maximum context length is ${served.maxModelLen} tokens. However, you requested ${promptLength + want} tokens (${promptLength} in the prompt, ${want} in the completion).`,
    );
}

/** The prompt ids and generated completion of a /v1/completions request. */
export function runCompletions(
  folder: TokenizerFolder,
  body: CompletionsBody,
  reasoning: boolean,
  stopId?: number,
): { promptIds: number[]; completion: Completion } {
  if (body.echo) throw new BadRequest("echo: true is not supported by the simulated engine");
  if ((body.n ?? 1) !== 1) throw new BadRequest("n > 1 is not supported by the simulated engine");
  if (body.logprobs === -1)
    throw new BadRequest("logprobs: -1 (the whole vocabulary) is not supported by the simulated engine");
  const promptIds = promptIdsOf(folder, body.prompt, "`prompt`");
  const completion = generate(
    folder,
    promptIds,
    {
      maxTokens: body.max_tokens === undefined ? VLLM_DEFAULT_MAX_TOKENS : (body.max_tokens ?? undefined),
      stop: stopList(body.stop, "stop"),
      stopTokenIds: new Set(body.stop_token_ids ?? []),
      schema: schemaOf(body),
      lengthFirst: false,
    },
    reasoning,
    stopId,
  );
  return { promptIds, completion };
}

/**
 * The legacy completions `logprobs` object: per generated token its text (or `token_id:N`),
 * its logprob, the sampled token and `k - 1` alternatives (the sampled token is the top
 * one, so `k` entries; one when k is 0), and text offsets summed over the token strings.
 */
export function completionLogprobs(
  folder: TokenizerFolder,
  ids: readonly number[],
  k: number,
  asTokenIds: boolean,
  start = 0,
): Record<string, unknown> {
  const tokenOf = (id: number) => (asTokenIds ? `token_id:${id}` : folder.decode([id]));
  const textOffset: number[] = [];
  const tokenLogprobs: number[] = [];
  const tokens: string[] = [];
  const top: Array<Record<string, number>> = [];
  let offset = 0;
  ids.forEach((id, i) => {
    const logprob = logprobAt(id, start + i);
    const token = tokenOf(id);
    textOffset.push(offset);
    offset += token.length;
    tokenLogprobs.push(logprob);
    tokens.push(token);
    const step: Record<string, number> = { [token]: logprob };
    for (const [alt, lp] of alternatives(id, logprob, Math.max(0, k - 1))) step[tokenOf(alt)] ??= lp;
    top.push(step);
  });
  return { text_offset: textOffset, token_logprobs: tokenLogprobs, tokens, top_logprobs: top };
}

/** The simulated expert id of a token's layer and slot (below 128, so every dtype holds it). */
export const simExpert = (token: number, layer: number, k: number) => (token * 31 + layer * 7 + k) % 128;

const NPY_DESCR = { uint8: "|u1", uint16: "<u2", int32: "<i4" } as const;

/**
 * vLLM's `choices[0].routed_experts` (`--enable-return-routed-experts`, vLLM PR #38939):
 * base64 of an `.npy` file of shape rows × layers × top-k in the dtype vLLM chose.
 */
export function vllmRoutedExperts(rows: number, layers: number, topK: number, dtype: keyof typeof NPY_DESCR): string {
  const size = { uint8: 1, uint16: 2, int32: 4 }[dtype];
  let header = `{'descr': '${NPY_DESCR[dtype]}', 'fortran_order': False, 'shape': (${rows}, ${layers}, ${topK}), }`;
  header += " ".repeat(63 - ((10 + header.length) % 64)) + "\n"; // data starts on a 64-byte boundary
  const head = Buffer.alloc(10);
  Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]).copy(head);
  head.writeUInt16LE(header.length, 8);
  const data = Buffer.alloc(rows * layers * topK * size);
  let i = 0;
  for (let t = 0; t < rows; t++)
    for (let l = 0; l < layers; l++)
      for (let k = 0; k < topK; k++, i++) {
        const v = simExpert(t, l, k);
        if (size === 1) data.writeUInt8(v, i);
        else if (size === 2) data.writeUInt16LE(v, i * 2);
        else data.writeInt32LE(v, i * 4);
      }
  return Buffer.concat([head, Buffer.from(header, "latin1"), data]).toString("base64");
}

/** The /v1/completions reply object. */
export function completionsResponse(
  folder: TokenizerFolder,
  body: CompletionsBody,
  options: {
    model: string;
    reasoning: boolean;
    stopId?: number;
    noTokenIds?: boolean;
    routedExperts?: { dtype: "uint8" | "uint16" | "int32"; layers: number; topK: number };
  },
): Record<string, unknown> {
  const { promptIds, completion } = runCompletions(folder, body, options.reasoning, options.stopId);
  const ids = completion.ids;
  // vLLM before 0.10.2 has no return_token_ids (ignored as an unknown field).
  const withIds = body.return_token_ids === true && options.noTokenIds !== true;
  const logprobs =
    typeof body.logprobs === "number"
      ? completionLogprobs(folder, ids, body.logprobs, body.return_tokens_as_token_ids === true, completion.offset)
      : null;
  const keepStop = body.include_stop_str_in_output === true;
  return {
    id: `cmpl-${randomUUID().replace(/-/g, "")}`,
    object: "text_completion",
    created: Math.floor(Date.now() / 1000),
    // vLLM answers with its served name (a request naming another is refused: checkCompletions).
    model: options.model,
    choices: [
      {
        index: 0,
        text: reportedText(folder, completion, body.skip_special_tokens !== false, keepStop),
        logprobs,
        finish_reason: completion.finish.type === "length" ? "length" : "stop",
        stop_reason: stopReason(completion),
        token_ids: withIds ? ids : null,
        prompt_logprobs: null,
        prompt_token_ids: withIds ? promptIds : null,
        ...(options.routedExperts && {
          routed_experts: vllmRoutedExperts(
            promptIds.length + ids.length - 1,
            options.routedExperts.layers,
            options.routedExperts.topK,
            options.routedExperts.dtype,
          ),
        }),
      },
    ],
    service_tier: null,
    system_fingerprint: null,
    usage: {
      prompt_tokens: promptIds.length,
      total_tokens: promptIds.length + ids.length,
      completion_tokens: ids.length,
      prompt_tokens_details: null,
    },
    kv_transfer_params: null,
  };
}

/** vLLM's error body (its `ErrorResponse`). */
export const completionsError = (message: string, status: number) => ({
  error: { message, type: ERROR_TYPES[status] ?? "InternalServerError", param: null, code: status },
});

const ERROR_TYPES: Record<number, string> = {
  400: "BadRequestError",
  404: "NotFoundError",
  500: "InternalServerError",
};
