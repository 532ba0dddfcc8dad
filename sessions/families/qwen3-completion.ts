// Splits a Qwen3 completion's text (decoded with special tokens kept) into reasoning, tool
// calls and content, the way SGLang's `qwen3` reasoning parser and `qwen25` tool-call
// detector do, so a token-level engine API gives the client the message the chat API
// would have. Two deliberate differences: a tool-call block that does not parse stays in
// the content verbatim (SGLang drops it), and text after the calls stays too (SGLang
// keeps only the text before the first call); the client sees everything the model wrote.
// The reasoning split and the stop-text cut are shared with the Qwen3-Coder XML parser
// (qwen3-coder-completion.ts: Qwen3.5, Nemotron 3).
import type { ParsedCompletion, StreamSyntax, ToolCall, ToolCallIdSource } from "./family.ts";
import { stripNewlines } from "./chatml.ts";
import { newToolCallId } from "./tool-call-id.ts";

// The engine may or may not put the stop token's text at the end of the completion.
const STOP_TEXTS = ["<|im_end|>", "<|endoftext|>"];
const THINK_OPEN = "<think>";
const THINK_CLOSE = "</think>";
const CALL_OPEN = "<tool_call>";
const CALL_CLOSE = "</tool_call>";

/** The markers parseQwen3Completion reacts to (a streamed reply is parsed with them). */
export const QWEN3_STREAM_SYNTAX: StreamSyntax = {
  blocks: [{ open: [CALL_OPEN], close: [CALL_CLOSE] }],
  markers: [THINK_OPEN, THINK_CLOSE, ...STOP_TEXTS],
};

/**
 * `promptOpened`: the generation prompt ended inside an open think block (Qwen3-Thinking-2507,
 * Qwen3-Next, Qwen3.5 with thinking on), so the completion starts in its reasoning.
 * `thinking` false: the prompt closed the think block (`enable_thinking: false`), so a
 * `</think>` without a `<think>` is text, not the end of reasoning.
 */
export function parseQwen3Completion(
  text: string,
  newId: ToolCallIdSource = newToolCallId,
  promptOpened = false,
  thinking = true,
): ParsedCompletion {
  const { reasoning, rest } = splitQwen3Reasoning(withoutStopText(text), promptOpened, thinking);
  const { content, calls, malformed } = splitToolCalls(rest, newId);
  const parsed: ParsedCompletion = { content, malformedToolCalls: malformed };
  if (reasoning) parsed.reasoning_content = reasoning;
  if (calls.length > 0) parsed.tool_calls = calls;
  return parsed;
}

export function withoutStopText(text: string): string {
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

/**
 * SGLang's `qwen3` reasoning split: the reasoning and the rest. Newlines around the
 * reasoning are stripped: the templates write "<think>\n" + r.strip("\n") + "\n</think>",
 * so stripping exactly those renders the model's own think block again. Reasoning ends at
 * the first `</think>`, or at a `<tool_call>` when it never closes; left open at the end (a
 * length cut), all of it is reasoning.
 */
export function splitQwen3Reasoning(
  text: string,
  promptOpened = false,
  thinking = true,
): { reasoning: string; rest: string } {
  let inner = text.trimStart();
  const opened = promptOpened || inner.startsWith(THINK_OPEN);
  while (inner.startsWith(THINK_OPEN)) inner = inner.slice(THINK_OPEN.length);
  if (!opened) inner = text;
  const close = inner.indexOf(THINK_CLOSE);
  const call = inner.indexOf(CALL_OPEN);
  if (opened) {
    if (close !== -1)
      return { reasoning: stripNewlines(inner.slice(0, close)), rest: inner.slice(close + THINK_CLOSE.length) };
    // Never closed: the model went straight to a tool call (SGLang ends reasoning there too),
    // or the length limit cut it short inside its reasoning.
    if (call !== -1) return { reasoning: stripNewlines(inner.slice(0, call)), rest: inner.slice(call) };
    return { reasoning: stripNewlines(inner), rest: "" };
  }
  // A "</think>" with no "<think>": the prompt opened the block, so the completion starts
  // inside it (unless the prompt closed it: thinking off). One that comes only after a tool
  // call opened is inside that call instead.
  if (thinking && close !== -1 && (call === -1 || close < call))
    return { reasoning: stripNewlines(text.slice(0, close)), rest: text.slice(close + THINK_CLOSE.length) };
  return { reasoning: "", rest: text };
}

function splitToolCalls(
  text: string,
  newId: ToolCallIdSource,
): { content: string; calls: ToolCall[]; malformed: number } {
  let content = "";
  const calls: ToolCall[] = [];
  let malformed = 0;
  let at = 0;
  for (;;) {
    const open = text.indexOf(CALL_OPEN, at);
    if (open === -1) break;
    const bodyStart = open + CALL_OPEN.length;
    const close = text.indexOf(CALL_CLOSE, bodyStart);
    // Unclosed at the end: the length limit cut the call short. It stays in the content, and
    // is not counted: the finish reason already says so.
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
    const call = toolCall(text.slice(bodyStart, close), newId);
    if (call) {
      content += text.slice(at, open);
      calls.push(call);
    } else {
      content += text.slice(at, end);
      malformed++;
    }
    at = end;
  }
  content += text.slice(at);
  // SGLang trims the content; the whitespace around and between calls goes with it.
  return { content: content.trim(), calls, malformed };
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/** `{"name": string, "arguments": object}` (whitespace around it allowed), else undefined. */
function toolCall(json: string, newId: ToolCallIdSource): ToolCall | undefined {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (!isObject(value) || typeof value.name !== "string" || value.name === "" || !isObject(value.arguments))
    return undefined;
  return { id: newId(), type: "function", function: { name: value.name, arguments: JSON.stringify(value.arguments) } };
}
