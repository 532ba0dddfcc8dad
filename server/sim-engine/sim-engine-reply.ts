// The simulated engine's "model": a deterministic reply derived from the prompt.
// Owns reply choice (plain text or a call of the first tool, shared by every engine API;
// written in Qwen's format here, in the model family's by sim-engine-model.ts), reading the
// facts it needs from a decoded Qwen prompt (turn count, last turn, offered tools), and the
// chat route's logprobs and SGLang-shaped response object.
// It never touches HTTP and never keeps state between requests: the same prompt
// always yields the same reply (apart from the response id and timestamp).
import { randomUUID } from "node:crypto";

const SENTENCES = [
  "The weather looks calm and clear today.",
  "I have checked the numbers and they add up.",
  "Here is a short summary of what I found.",
  "That task is done; nothing else is pending.",
  "The answer depends on the input you gave me.",
  "Let me know if you need anything more.",
  "I looked it up and the result is consistent.",
  "Everything went as planned on this step.",
];

/** What the engine knows about a prompt once it has its token ids. */
export interface PromptFacts {
  ids: readonly number[];
  /** Assistant turns already in the conversation (0 on the first turn). */
  turn: number;
  /** The last turn before the generation prompt is a tool result. */
  afterToolResult: boolean;
  tools: readonly unknown[];
}

export interface SimReply {
  content: string;
  reasoningContent?: string;
  toolCalls?: Array<{ id: string; type: "function"; function: { name: string; arguments: string } }>;
  completionIds: number[];
  finish: "stop" | "tool_calls" | "length";
  /** Ids of a partial completion the prompt already ended with (sim-engine-continue.ts): positions start there. */
  offset?: number;
}

/** FNV-1a over 32-bit ids: cheap, stable across processes, good enough to pick a sentence. */
export function hashIds(ids: readonly number[], seed = 0x811c9dc5): number {
  let h = seed >>> 0;
  for (const id of ids) {
    h ^= id & 0xffff;
    h = Math.imul(h, 0x01000193) >>> 0;
    h ^= id >>> 16;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** JSON with Python's json.dumps separators (", " and ": "), as Qwen's template and SGLang write it. */
export function pyJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pyJson).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    const parts = Object.entries(value as Record<string, unknown>).map(
      ([k, v]) => `${JSON.stringify(k)}: ${pyJson(v)}`,
    );
    return `{${parts.join(", ")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

function toolFunction(tool: unknown): { name: string; parameters?: Record<string, unknown> } | undefined {
  if (!tool || typeof tool !== "object") return undefined;
  const t = tool as Record<string, unknown>;
  const fn = (t.function && typeof t.function === "object" ? t.function : t) as Record<string, unknown>;
  if (typeof fn.name !== "string") return undefined;
  return { name: fn.name, parameters: fn.parameters as Record<string, unknown> | undefined };
}

function sampleValue(schema: unknown): unknown {
  const s = (schema && typeof schema === "object" ? schema : {}) as Record<string, unknown>;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case "integer":
    case "number":
      return 1;
    case "boolean":
      return true;
    case "array":
      return [];
    case "object":
      return {};
    case "null":
      return null;
    default:
      return "value";
  }
}

/** A small deterministic argument object from a JSON-schema `parameters`: one sample value per property. */
export function sampleArguments(parameters: Record<string, unknown> | undefined): Record<string, unknown> {
  const props = (parameters?.properties ?? {}) as Record<string, unknown>;
  const args: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(props)) args[key] = sampleValue(schema);
  return args;
}

/**
 * A structured-output answer for a JSON schema: an object schema, or one without a type
 * (`{}` is how "any JSON object" is asked for), gets one value per property.
 */
export function sampleJson(schema: unknown): unknown {
  const s = (schema && typeof schema === "object" ? schema : {}) as Record<string, unknown>;
  return s.type === undefined || s.type === "object" ? sampleArguments(s) : sampleValue(s);
}

/** Deterministic negative logprob for the token at `position`. */
export function logprobAt(id: number, position: number): number {
  const h = hashIds([id, position]);
  return -(1 + (h % 4000)) / 1000;
}

/**
 * Turn count and tool-result flag from a decoded Qwen-style prompt: the final
 * `<|im_start|>assistant` without an `<|im_end|>` after it is the generation prompt;
 * the block before it is the last turn. Tool results render as a `user` block whose
 * content starts with `<tool_response>`.
 */
export function factsFromText(text: string): { turn: number; afterToolResult: boolean } {
  const opener = "<|im_start|>assistant";
  let turn = text.split(opener).length - 1;
  let end = text.length;
  const gen = text.lastIndexOf(opener);
  if (gen >= 0 && !text.includes("<|im_end|>", gen)) {
    turn -= 1;
    end = gen;
  }
  const start = text.lastIndexOf("<|im_start|>", end - 1);
  if (start < 0) return { turn: Math.max(turn, 0), afterToolResult: false };
  const block = text.slice(start + "<|im_start|>".length, end);
  const afterToolResult = block.startsWith("user\n") && block.slice(5).trimStart().startsWith("<tool_response>");
  return { turn: Math.max(turn, 0), afterToolResult };
}

/**
 * Tools offered by a decoded Qwen prompt: the JSON lines between `<tools>` and `</tools>`
 * in the first (system) block, as the chat template writes them. Lines that do not parse
 * are skipped, like a model would ignore them.
 */
export function toolsFromText(text: string): unknown[] {
  // Only the first block can hold the tool list; never scan a long history for it.
  const firstEnd = text.indexOf("<|im_end|>");
  const open = firstEnd < 0 ? text.indexOf("<tools>\n") : text.lastIndexOf("<tools>\n", firstEnd);
  if (open < 0) return [];
  const close = text.indexOf("\n</tools>", open);
  if (close < 0) return [];
  const tools: unknown[] = [];
  for (const line of text.slice(open + "<tools>\n".length, close).split("\n")) {
    try {
      tools.push(JSON.parse(line));
    } catch {
      // not a tool line
    }
  }
  return tools;
}

/**
 * What the model says for a prompt: a call of the first tool, when tools are offered and
 * the last turn is not a tool result; else a sentence picked by the prompt's hash.
 */
export interface ReplyPlan {
  /** The completion text before the stop token, in Qwen's format. */
  text: string;
  tool?: { name: string; arguments: string };
}

export function planReply(facts: PromptFacts): ReplyPlan {
  const h = hashIds(facts.ids);
  const tool = facts.afterToolResult ? undefined : facts.tools.map(toolFunction).find((t) => t !== undefined);
  if (!tool) return { text: `Turn ${facts.turn + 1}: ${SENTENCES[h % SENTENCES.length]}` };
  const args = pyJson(sampleArguments(tool.parameters));
  return {
    text: `<tool_call>\n{"name": ${JSON.stringify(tool.name)}, "arguments": ${args}}\n</tool_call>`,
    tool: { name: tool.name, arguments: args },
  };
}

/** Marker value replaced by the routed_experts bytes when the body is written (see sim-engine-payload.ts). */
export const ROUTED_EXPERTS_MARKER = "__tito_sim_routed_experts__";

/** The SGLang-shaped response object; routed_experts, when wanted, holds the marker. */
export function responseObject(
  model: string,
  promptTokens: number,
  reply: SimReply,
  stopId: number | undefined,
  withRoutedExperts: boolean,
): Record<string, unknown> {
  const id = randomUUID().replace(/-/g, "");
  const ids = reply.completionIds;
  const matchedStop = reply.finish !== "length" && ids.length > 0 && ids[ids.length - 1] === stopId;
  const metaInfo: Record<string, unknown> = {
    id,
    prompt_tokens: promptTokens,
    completion_tokens: ids.length,
    output_token_logprobs: ids.map((t, i) => [logprobAt(t, (reply.offset ?? 0) + i), t]),
    finish_reason:
      reply.finish === "length"
        ? { type: "length", length: ids.length }
        : matchedStop
          ? { type: "stop", matched: stopId }
          : { type: "stop" },
  };
  if (withRoutedExperts) metaInfo.routed_experts = ROUTED_EXPERTS_MARKER;
  const message: Record<string, unknown> = { role: "assistant", content: reply.content };
  if (reply.reasoningContent !== undefined) message.reasoning_content = reply.reasoningContent;
  if (reply.toolCalls) message.tool_calls = reply.toolCalls;
  return {
    id,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: reply.finish, meta_info: metaInfo }],
    usage: { prompt_tokens: promptTokens, completion_tokens: ids.length, total_tokens: promptTokens + ids.length },
  };
}
