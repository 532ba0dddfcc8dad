// Splits a GLM-4.7 / GLM-5 completion's text (decoded with special tokens kept) into
// reasoning, tool calls and content, the way SGLang's `glm45` reasoning parser and `glm47`
// tool-call detector do: the prompt ends `<think>` (thinking on), so the output starts
// inside the reasoning, which `</think>` or a first `<tool_call>` ends; calls are
// `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…</tool_call>`, values typed
// by the tool's schema (tool-args.ts); the content is all text outside the calls, trimmed.
// House differences (as in qwen3-completion.ts): a block that does not parse, or that calls
// a tool the request did not declare, stays in the content verbatim and is counted (SGLang
// drops it); a block the length limit left unclosed stays in the content uncounted.
import type { ParseContext, ParsedCompletion, StreamSyntax, ToolCall } from "./family.ts";
import { newToolCallId } from "./tool-call-id.ts";
import { glmArgumentValue, isDeclaredTool, parameterTypes } from "./tool-args.ts";

const STOP_TEXTS = ["<|observation|>", "<|user|>", "<|endoftext|>"];
const THINK_OPEN = "<think>";
const THINK_CLOSE = "</think>";
const CALL_OPEN = "<tool_call>";
const CALL_CLOSE = "</tool_call>";
const KEY_OPEN = "<arg_key>";
/** One argument: key, whitespace allowed before the value, value (both taken verbatim; the key is trimmed). */
const ARGUMENT = /^\s*<arg_key>([\s\S]*?)<\/arg_key>\s*<arg_value>([\s\S]*?)<\/arg_value>/;

/** The markers parseGlm47Completion reacts to (a streamed reply is parsed with them). */
export const GLM47_STREAM_SYNTAX: StreamSyntax = {
  blocks: [{ open: [CALL_OPEN], close: [CALL_CLOSE] }],
  markers: [THINK_OPEN, THINK_CLOSE, ...STOP_TEXTS],
};

export function parseGlm47Completion(text: string, context: ParseContext = {}): ParsedCompletion {
  const { reasoning, rest } = splitReasoning(withoutStopText(text), context.kwargs?.enable_thinking !== false);
  const { content, calls, malformed } = splitToolCalls(rest, context);
  const parsed: ParsedCompletion = { content, malformedToolCalls: malformed };
  if (reasoning) parsed.reasoning_content = reasoning;
  if (calls.length > 0) parsed.tool_calls = calls;
  return parsed;
}

function withoutStopText(text: string): string {
  for (let cut = true; cut;) {
    cut = false;
    for (const stop of STOP_TEXTS)
      if (text.endsWith(stop)) {
        text = text.slice(0, -stop.length);
        cut = true;
      }
  }
  return text;
}

/** `thinking`: the generation prompt opened the think block (it ends `<think>`, not `</think>`). */
function splitReasoning(text: string, thinking: boolean): { reasoning: string; rest: string } {
  const lead = text.trimStart();
  if (lead.startsWith(THINK_OPEN)) {
    text = lead.slice(THINK_OPEN.length);
    thinking = true;
  }
  if (!thinking) return { reasoning: "", rest: text };
  const close = text.indexOf(THINK_CLOSE);
  const call = text.indexOf(CALL_OPEN);
  if (close !== -1 && (call === -1 || close < call))
    return { reasoning: text.slice(0, close).trim(), rest: text.slice(close + THINK_CLOSE.length) };
  // The model went straight to a tool call (SGLang ends the reasoning there too), or the
  // length limit cut it short inside its reasoning.
  if (call !== -1) return { reasoning: text.slice(0, call).trim(), rest: text.slice(call) };
  return { reasoning: text.trim(), rest: "" };
}

function splitToolCalls(
  text: string,
  context: ParseContext,
): { content: string; calls: ToolCall[]; malformed: number } {
  const newId = context.newId ?? newToolCallId;
  let content = "";
  const calls: ToolCall[] = [];
  let malformed = 0;
  let at = 0;
  for (;;) {
    const open = text.indexOf(CALL_OPEN, at);
    if (open === -1) break;
    const bodyStart = open + CALL_OPEN.length;
    const close = text.indexOf(CALL_CLOSE, bodyStart);
    // Unclosed at the end: the length limit cut the call short; not counted.
    if (close === -1) break;
    const reopen = text.indexOf(CALL_OPEN, bodyStart);
    if (reopen !== -1 && reopen < close) {
      // Opened again before it closed: this opener is malformed, the next one starts over.
      content += text.slice(at, reopen);
      malformed++;
      at = reopen;
      continue;
    }
    const end = close + CALL_CLOSE.length;
    const call = toolCall(text.slice(bodyStart, close), context);
    if (call) {
      content += text.slice(at, open);
      calls.push({ id: newId(), type: "function", function: call });
    } else {
      content += text.slice(at, end);
      malformed++;
    }
    at = end;
  }
  content += text.slice(at);
  return { content: content.trim(), calls, malformed };
}

/** `NAME<arg_key>…</arg_value>…` (nothing else but whitespace), else undefined. */
function toolCall(body: string, context: ParseContext): ToolCall["function"] | undefined {
  const firstKey = body.indexOf(KEY_OPEN);
  const name = (firstKey === -1 ? body : body.slice(0, firstKey)).trim();
  if (name === "" || /[<>]/.test(name) || !isDeclaredTool(context.tools, name)) return undefined;
  const args: Record<string, unknown> = {};
  let rest = firstKey === -1 ? "" : body.slice(firstKey);
  for (let m = ARGUMENT.exec(rest); m; m = ARGUMENT.exec(rest)) {
    const key = m[1]!.trim();
    if (key === "") return undefined;
    args[key] = glmArgumentValue(m[2]!, parameterTypes(context.tools, name, key));
    rest = rest.slice(m[0].length);
  }
  if (rest.trim() !== "") return undefined;
  return { name, arguments: JSON.stringify(args) };
}
