// What the token-level engine APIs (`sglang-generate`, `vllm-completions`) take from the
// client's OpenAI chat request. The prompt is already token ids, so `messages` and `tools`
// have done their work (the chat template rendered them); what is left are the sampling
// fields, mapped field by field, and the fields no token-level API can honour here, each
// refused with a 400 that names it. docs/engines.md has the table this code implements.
import type { SamplingDefaults } from "../sessions/engine-port.ts";
import { InvalidChatRequestError } from "../sessions/errors.ts";

/** The sampling fields both APIs understand, read and type-checked once. */
export interface Sampling {
  temperature?: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  maxTokens?: number;
  stop?: string[];
  seed?: number;
  frequency_penalty?: number;
  presence_penalty?: number;
  repetition_penalty?: number;
  /** response_format json_schema's schema. */
  jsonSchema?: Record<string, unknown>;
  /** response_format json_object: any JSON object (not any JSON value). */
  jsonObject?: boolean;
}

const refuse = (message: string) => new InvalidChatRequestError(message);

function number(body: Record<string, unknown>, key: string): number | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isFinite(value)) throw refuse(`\`${key}\` must be a number`);
  return value;
}

function integer(body: Record<string, unknown>, key: string, min: number): number | undefined {
  const value = number(body, key);
  if (value !== undefined && (!Number.isInteger(value) || value < min))
    throw refuse(`\`${key}\` must be an integer of at least ${min}`);
  return value;
}

function stopList(value: unknown): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string") return [value];
  if (Array.isArray(value) && value.every((s) => typeof s === "string")) return value as string[];
  throw refuse("`stop` must be a string or a list of strings");
}

function schemaOf(format: unknown): Record<string, unknown> | "object" | undefined {
  if (format === undefined || format === null) return undefined;
  const f = format as { type?: unknown; json_schema?: { schema?: unknown } };
  if (f.type === "text") return undefined;
  if (f.type === "json_object") return "object";
  if (f.type === "json_schema") {
    const schema = f.json_schema?.schema;
    if (!schema || typeof schema !== "object" || Array.isArray(schema))
      throw refuse("`response_format.json_schema.schema` must be a JSON schema object");
    return schema as Record<string, unknown>;
  }
  throw refuse('`response_format.type` must be "text", "json_object" or "json_schema"');
}

/**
 * The client's sampling fields, or a 400 naming the first field the token-level APIs cannot
 * honour: several choices (`n` > 1), logprob alternatives (`top_logprobs`: the reply the
 * server builds carries the sampled tokens' logprobs only), and a `tool_choice`
 * other than "auto" (the model is prompted with the tools; nothing can force or forbid a call).
 */
export function readSampling(
  body: Record<string, unknown>,
  api: string,
  defaults: Readonly<SamplingDefaults> = {},
): Sampling {
  const n = integer(body, "n", 1);
  if (n !== undefined && n > 1)
    throw refuse(`\`n\` > 1 is not supported with --engine-api ${api}: one choice per turn`);
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== "boolean")
    throw refuse("`stream` must be a boolean");
  const top = integer(body, "top_logprobs", 0);
  if (top !== undefined && top > 0)
    throw refuse(`\`top_logprobs\` is not supported with --engine-api ${api}: replies carry the sampled tokens only`);
  const choice = body.tool_choice;
  if (choice !== undefined && choice !== null && choice !== "auto")
    throw refuse(`\`tool_choice\` ${JSON.stringify(choice)} is not supported with --engine-api ${api}: only "auto"`);
  const maxTokens = integer(body, "max_completion_tokens", 1) ?? integer(body, "max_tokens", 1);
  const topK = integer(body, "top_k", -1);
  // SGLang refuses 0 ("top_k must be -1 (disable) or at least 1": SamplingParams.verify,
  // python/sglang/srt/sampling/sampling_params.py @ 00c17cafcb9e289d5ca97c50e44ada54e4fd5b03);
  // vLLM takes 0 as "disabled" (CompletionRequest's default, vllm/entrypoints/openai/completion/
  // protocol.py @ d5dba2d7b0ab9b98096560c69db7126b54b14d79).
  if (topK === 0 && api.startsWith("sglang"))
    throw refuse(`\`top_k\` must be -1 (disable) or at least 1 with --engine-api ${api} (SGLang refuses 0)`);
  const format = schemaOf(body.response_format);
  return {
    temperature: number(body, "temperature") ?? defaults.temperature,
    top_p: number(body, "top_p") ?? defaults.top_p,
    top_k: topK ?? defaults.top_k,
    min_p: number(body, "min_p"),
    maxTokens,
    stop: stopList(body.stop),
    seed: integer(body, "seed", 0),
    frequency_penalty: number(body, "frequency_penalty"),
    presence_penalty: number(body, "presence_penalty"),
    repetition_penalty: number(body, "repetition_penalty"),
    jsonSchema: format === "object" ? undefined : format,
    jsonObject: format === "object" ? true : undefined,
  };
}

/** `fields` without its undefined members, as a JSON object's text. */
export function definedJson(fields: Record<string, unknown>): string {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) out[key] = value;
  return JSON.stringify(out);
}

/**
 * A request body whose first member is the prompt's ids, as its parts: the ids' bytes are
 * not copied (they can be long: ids-text.ts idsBytes; request-body.ts says why).
 */
export function withIds(key: string, promptBytes: Buffer, rest: string): Buffer[] {
  const tail = rest === "{}" ? "}" : `,${rest.slice(1)}`;
  return [Buffer.from(`{"${key}":[`, "utf8"), promptBytes, Buffer.from(`]${tail}`, "utf8")];
}
