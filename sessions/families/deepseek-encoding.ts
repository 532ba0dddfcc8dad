// What the DeepSeek V3.2 and V4 encoders (deepseekv32-encoder.ts, deepseekv4-encoder.ts)
// share: the sentinel texts, the and its alias kwargs, message text, tool lists, tool-call arguments and
// the DSML tool-call block. DeepSeek ships these encoders as Python code, not as a jinja
// template; the format facts are in docs/models.md. Everything here reads its
// inputs and builds new strings: nothing the caller passed is ever changed. JSON is
// written as Python's json.dumps writes it (tool-args.ts templateJson).
import { templateJson } from "./tool-args.ts";

export const BOS = "<｜begin▁of▁sentence｜>";
export const EOS = "<｜end▁of▁sentence｜>";
export const USER = "<｜User｜>";
export const ASSISTANT = "<｜Assistant｜>";
export const THINK_OPEN = "<think>";
export const THINK_CLOSE = "</think>";
/** The marker inside every tool-call tag: `<｜DSML｜invoke …>`. */

export const DSML = "｜DSML｜";

/** The kwargs that mean one switch (thinking on/off); `thinking_mode` wins, then `enable_thinking`. */
export const THINKING_KWARGS = ["thinking_mode", "enable_thinking", "thinking"] as const;

export type Kwargs = Readonly<Record<string, unknown>>;
export type ThinkingMode = "thinking" | "chat";

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/** A kwarg that is absent or null counts as not given. */
const given = (kwargs: Kwargs, key: string): boolean => kwargs[key] !== undefined && kwargs[key] !== null;

/**
 * The thinking mode a render uses: `thinking_mode` ("thinking" | "chat") when given, else
 * `enable_thinking`, else `thinking` (booleans), else thinking.
 */
export function thinkingMode(kwargs: Kwargs): ThinkingMode {
  if (given(kwargs, "thinking_mode")) {
    const mode = kwargs.thinking_mode;
    if (mode !== "thinking" && mode !== "chat")
      throw new Error(`thinking_mode must be "thinking" or "chat", not ${JSON.stringify(mode)}`);
    return mode;
  }
  for (const key of ["enable_thinking", "thinking"]) {
    if (!given(kwargs, key)) continue;
    if (typeof kwargs[key] !== "boolean")
      throw new Error(`${key} must be a boolean, not ${JSON.stringify(kwargs[key])}`);
    return kwargs[key] ? "thinking" : "chat";
  }
  return "thinking";
}

/** The thinking mode for parsing: as rendered, or thinking when the kwargs would not render at all. */
export function parseThinkingMode(kwargs: Kwargs | undefined): ThinkingMode {
  try {
    return thinkingMode(kwargs ?? {});
  } catch {
    return "thinking";
  }
}

/** Throws on a kwarg the encoder does not know (a typo would otherwise render silently wrong). */
export function checkKwargs(kwargs: Kwargs, known: readonly string[], encoder: string): void {
  const unknown = Object.keys(kwargs).filter((k) => !known.includes(k));
  if (unknown.length > 0)
    throw new Error(
      `the ${encoder} encoder does not know the chat template kwargs ${unknown.join(", ")} (known: ${known.join(", ")})`,
    );
}

/** `drop_thinking`: a boolean, default true as in DeepSeek's own encoders (the families pin false). */
export function dropThinking(kwargs: Kwargs): boolean {
  if (!given(kwargs, "drop_thinking")) return true;
  if (typeof kwargs.drop_thinking !== "boolean")
    throw new Error(`drop_thinking must be a boolean, not ${JSON.stringify(kwargs.drop_thinking)}`);
  return kwargs.drop_thinking;
}

/**
 * A message's text: a string as is, null/absent as "", a list of parts as its text parts
 * joined by one space (SGLang flattens list content that way for these encoders).
 */
export function textOf(content: unknown, where: string): string {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content
      .filter(
        (p): p is { type: "text"; text: string } => isObject(p) && p.type === "text" && typeof p.text === "string",
      )
      .map((p) => p.text)
      .join(" ");
  throw new Error(`${where}: content must be a string or a list of parts`);
}

/** The reasoning of an assistant message (`reasoning_content`, or DeepSeek's own `reasoning`). */
export function reasoningOf(message: Readonly<Record<string, unknown>>): string {
  const r = message.reasoning_content ?? message.reasoning;
  return typeof r === "string" ? r : "";
}

/**
 * The function schemas of a request's tools (OpenAI shape `{type: "function", function}`);
 * a bare function object is taken as is only when `acceptBare`. Empty or absent: none.
 */
export function toolFunctions(tools: readonly unknown[] | null | undefined, acceptBare: boolean): unknown[] {
  if (!tools || tools.length === 0) return [];
  return tools.map((tool, i) => {
    if (isObject(tool) && isObject(tool.function)) return tool.function;
    if (acceptBare && isObject(tool) && typeof tool.name === "string") return tool;
    throw new Error(`tools[${i}] must be {"type": "function", "function": {...}}`);
  });
}

export interface EncodedCall {
  name: string;
  args: Record<string, unknown>;
}

/**
 * The tool calls of an assistant message, arguments as objects (given as an object or a
 * JSON string). A string that is not JSON: an error, or with `wrapInvalid` (V4's rule) the
 * object `{"arguments": string}`.
 */
export function toolCallsOf(message: Readonly<Record<string, unknown>>, wrapInvalid: boolean): EncodedCall[] {
  const calls = message.tool_calls;
  if (calls === undefined || calls === null) return [];
  if (!Array.isArray(calls)) throw new Error("an assistant's tool_calls must be a list");
  return calls.map((call, i) => {
    const fn = isObject(call) ? call.function : undefined;
    if (!isObject(fn) || typeof fn.name !== "string") throw new Error(`tool_calls[${i}] has no function name`);
    let args = fn.arguments;
    if (typeof args === "string") {
      try {
        args = JSON.parse(args);
      } catch {
        if (!wrapInvalid) throw new Error(`tool_calls[${i}].function.arguments is not JSON`);
        args = { arguments: fn.arguments };
      }
    }
    if (args === undefined || args === null) args = {};
    if (!isObject(args)) throw new Error(`tool_calls[${i}].function.arguments must be a JSON object`);
    return { name: fn.name, args };
  });
}

/** One `<｜DSML｜parameter …>` line: strings raw with string="true", anything else as JSON. */
function dsmlParameter(key: string, value: unknown): string {
  const isString = typeof value === "string";
  const text = isString ? value : templateJson(value);
  return `<${DSML}parameter name="${key}" string="${isString}">${text}</${DSML}parameter>`;
}

/**
 * The tool-call block after an assistant's content: "\n\n<｜DSML｜{block}>\n", one invoke
 * per call (parameters one a line) joined by "\n", then "\n</｜DSML｜{block}>". None: "".
 */
export function dsmlBlock(block: string, calls: readonly EncodedCall[]): string {
  if (calls.length === 0) return "";
  const invokes = calls.map((call) => {
    const params = Object.entries(call.args).map(([k, v]) => dsmlParameter(k, v));
    return `<${DSML}invoke name="${call.name}">\n${params.join("\n")}\n</${DSML}invoke>`;
  });
  return `\n\n<${DSML}${block}>\n${invokes.join("\n")}\n</${DSML}${block}>`;
}

/** `text` without `suffix` at its end (which the caller knows is there). */
export function withoutSuffix(text: string, suffix: string): string {
  return text.endsWith(suffix) ? text.slice(0, text.length - suffix.length) : text;
}

/** The role of a message, checked: the encoders know a fixed set. */
export function roleOf(message: Readonly<Record<string, unknown>>, index: number, known: readonly string[]): string {
  const role = message.role;
  if (typeof role !== "string" || !known.includes(role))
    throw new Error(`message ${index} has role ${JSON.stringify(role)}; this encoder knows ${known.join(", ")}`);
  return role;
}
