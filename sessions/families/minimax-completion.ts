// Parses a MiniMax M2.5 / M2.7 completion's text the way SGLang's `minimax-append-think`
// reasoning parser and `minimax-m2` tool-call detector do. The generation prompt ends
// `<think>\n`, so the output is `{reasoning}\n</think>\n\n{content}…`; the reasoning parser
// does not split it: it puts `<think>` back in front and returns everything as content
// (no reasoning_content), and the template re-splits that content at `</think>` when the
// message comes back. Tool calls are blocks
//   <minimax:tool_call>\n<invoke name="N">\n<parameter name="K">V</parameter>\n…</invoke>\n</minimax:tool_call>
// (several invokes per block allowed), values stripped of surrounding newlines and typed
// by the tool's schema (tool-args.ts); the content is all text outside the blocks, not trimmed.
// House differences (see qwen3-completion.ts): a block that does not parse stays in the
// content verbatim and is counted; so does a block calling a tool the request did not
// declare (SGLang drops such a call and its text): the client sees everything the model
// wrote, the template renders that content back as written, and the metric counts it.
// Blocks are looked for after the reasoning only (a `<minimax:tool_call>` the model merely
// thought about is not a call). A block the length limit left unclosed stays uncounted.
import type { ParseContext, ParsedCompletion, StreamSyntax, ToolCall } from "./family.ts";
import { newToolCallId } from "./tool-call-id.ts";
import { isDeclaredTool, minimaxArgumentValue, parameterTypes } from "./tool-args.ts";

const STOP_TEXT = "[e~[";
const THINK_OPEN = "<think>";
const THINK_CLOSE = "</think>";
const BLOCK_OPEN = "<minimax:tool_call>";
const BLOCK_CLOSE = "</minimax:tool_call>";
const INVOKE = /^\s*<invoke name="([^"<>]*)">([\s\S]*?)<\/invoke>/;
const PARAMETER = /^\s*<parameter name="([^"<>]*)">([\s\S]*?)<\/parameter>/;

/** The markers parseMinimaxCompletion reacts to (a streamed reply is parsed with them). */
export const MINIMAX_STREAM_SYNTAX: StreamSyntax = {
  blocks: [{ open: [BLOCK_OPEN], close: [BLOCK_CLOSE] }],
  markers: [THINK_OPEN, THINK_CLOSE, STOP_TEXT],
};

export function parseMinimaxCompletion(text: string, context: ParseContext = {}): ParsedCompletion {
  while (text.endsWith(STOP_TEXT)) text = text.slice(0, -STOP_TEXT.length);
  if (!text.startsWith(THINK_OPEN)) text = THINK_OPEN + text;
  const close = text.indexOf(THINK_CLOSE);
  const callsFrom = close === -1 ? 0 : close + THINK_CLOSE.length;
  const newId = context.newId ?? newToolCallId;
  let content = text.slice(0, callsFrom);
  const calls: ToolCall[] = [];
  let malformed = 0;
  let at = callsFrom;
  for (;;) {
    const open = text.indexOf(BLOCK_OPEN, at);
    if (open === -1) break;
    const bodyStart = open + BLOCK_OPEN.length;
    const end = text.indexOf(BLOCK_CLOSE, bodyStart);
    // Unclosed at the end: the length limit cut the block short; not counted.
    if (end === -1) break;
    const reopen = text.indexOf(BLOCK_OPEN, bodyStart);
    if (reopen !== -1 && reopen < end) {
      content += text.slice(at, reopen);
      malformed++;
      at = reopen;
      continue;
    }
    const after = end + BLOCK_CLOSE.length;
    const found = blockCalls(text.slice(bodyStart, end), context);
    if (found) {
      content += text.slice(at, open);
      for (const fn of found) calls.push({ id: newId(), type: "function", function: fn });
    } else {
      content += text.slice(at, after);
      malformed++;
    }
    at = after;
  }
  content += text.slice(at);
  const parsed: ParsedCompletion = { content, malformedToolCalls: malformed };
  if (calls.length > 0) parsed.tool_calls = calls;
  return parsed;
}

/** The block's invokes (at least one, nothing else but whitespace), each of a declared tool; else undefined. */
function blockCalls(body: string, context: ParseContext): ToolCall["function"][] | undefined {
  const out: ToolCall["function"][] = [];
  let rest = body;
  for (let m = INVOKE.exec(rest); m; m = INVOKE.exec(rest)) {
    const name = m[1]!.trim();
    if (name === "" || !isDeclaredTool(context.tools, name)) return undefined;
    const args = invokeArguments(m[2]!, name, context);
    if (!args) return undefined;
    out.push({ name, arguments: JSON.stringify(args) });
    rest = rest.slice(m[0].length);
  }
  return out.length > 0 && rest.trim() === "" ? out : undefined;
}

function invokeArguments(body: string, name: string, context: ParseContext): Record<string, unknown> | undefined {
  const args: Record<string, unknown> = {};
  let rest = body;
  for (let m = PARAMETER.exec(rest); m; m = PARAMETER.exec(rest)) {
    const key = m[1]!.trim();
    if (key === "") return undefined;
    const value = m[2]!.replace(/^\n+/, "").replace(/\n+$/, "");
    args[key] = minimaxArgumentValue(value, parameterTypes(context.tools, name, key));
    rest = rest.slice(m[0].length);
  }
  return rest.trim() === "" ? args : undefined;
}
