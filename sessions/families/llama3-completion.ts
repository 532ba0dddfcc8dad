// Splits a Llama 3.x completion's text (decoded with special tokens kept) into content and
// tool calls the way SGLang's `llama3` tool-call detector does: the calls are JSON objects
// `{"name": …, "parameters": {…}}` (or `"arguments"`), separated by ";", either after a
// `<|python_tag|>` (the text before it is the content) or making up the whole completion
// when it starts with "{". There is no reasoning. House differences, as in
// qwen3-completion.ts: an object that does not parse as a call stays in the content and is
// counted (SGLang drops it); one still open at the end (a length cut) stays in the content
// uncounted; text after the calls stays in the content.
import { LLAMA3_STOP_TEXTS as STOP_TEXTS } from "./completion-formats.ts";
import type { ParsedCompletion, StreamSyntax, ToolCall, ToolCallIdSource } from "./family.ts";
import { withoutStopTexts } from "./tagged-completion.ts";
import { newToolCallId } from "./tool-call-id.ts";
import { isObject } from "./tool-args.ts";

export const PYTHON_TAG = "<|python_tag|>";
const SEPARATOR = ";";

/**
 * The markers parseLlama3Completion reacts to: everything after `<|python_tag|>` is calls
 * (held to the end), and so is a completion that starts with "{".
 */
export const LLAMA3_STREAM_SYNTAX: StreamSyntax = {
  blocks: [{ open: [PYTHON_TAG], close: [] }],
  markers: STOP_TEXTS,
  leading: ["{"],
};

export function parseLlama3Completion(text: string, newId: ToolCallIdSource = newToolCallId): ParsedCompletion {
  text = withoutStopTexts(text, STOP_TEXTS);
  const tag = text.indexOf(PYTHON_TAG);
  if (tag === -1 && !text.startsWith("{")) return { content: text, malformedToolCalls: 0 };
  const before = tag === -1 ? "" : text.slice(0, tag);
  const action = tag === -1 ? text : text.slice(tag + PYTHON_TAG.length);
  const { calls, rest, malformed } = splitCalls(action, newId);
  const parsed: ParsedCompletion = { content: (before + rest).trim(), malformedToolCalls: malformed };
  if (calls.length > 0) parsed.tool_calls = calls;
  return parsed;
}

const isSpace = (c: string | undefined) => c === " " || c === "\n" || c === "\t" || c === "\r";

function skipSpace(text: string, at: number): number {
  while (at < text.length && isSpace(text[at])) at++;
  return at;
}

/** The index just past the object opening at `start` (strings and escapes respected), or -1 if it never closes. */
function objectEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{") depth++;
    else if (c === "}" && --depth === 0) return i + 1;
  }
  return -1;
}

/**
 * The `;`-separated objects at the start of `action`: each one a call or, when it does not
 * parse as one, content. Parsing stops at anything that is not an object (that text, and
 * an object the length limit cut open, is content).
 */
function splitCalls(action: string, newId: ToolCallIdSource): { calls: ToolCall[]; rest: string; malformed: number } {
  const calls: ToolCall[] = [];
  let rest = "";
  let malformed = 0;
  let at = skipSpace(action, 0);
  while (at < action.length && action[at] === "{") {
    const end = objectEnd(action, at);
    if (end === -1) break;
    const body = action.slice(at, end);
    const call = toolCall(body, newId);
    if (call) calls.push(call);
    else {
      rest += body;
      malformed++;
    }
    at = skipSpace(action, end);
    if (action[at] !== SEPARATOR) break;
    at = skipSpace(action, at + 1);
  }
  return { calls, rest: rest + action.slice(at), malformed };
}

/** `{"name": string, "parameters" | "arguments": object}`, else undefined. */
function toolCall(json: string, newId: ToolCallIdSource): ToolCall | undefined {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (!isObject(value) || typeof value.name !== "string" || value.name === "") return undefined;
  const args = value.parameters ?? value.arguments ?? {};
  if (!isObject(args)) return undefined;
  return { id: newId(), type: "function", function: { name: value.name, arguments: JSON.stringify(args) } };
}
