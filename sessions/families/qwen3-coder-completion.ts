// Qwen3-Coder XML tool calls, as Qwen3.5 and Nemotron 3 write them (SGLang `qwen3_coder`):
//   <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n…</function>\n</tool_call>
// Parsing follows SGLang's detector: a block may hold one or more functions; a function or
// parameter left unclosed ends at the next tag or the block's end; one leading and one
// trailing newline are stripped from each value, which is then typed by the tool's JSON
// schema (tool-args.ts); a call to an undeclared tool is kept. The content is the text
// before the first call, not trimmed at its end. The house differences (as for Qwen3's
// `qwen25`, qwen3-completion.ts): a block with no function in it stays in the content and
// counts as malformed; a block left unclosed at the end (a length cut) stays in the content
// uncounted; text the model wrote after or between calls stays in the content unless it is
// only the whitespace that separates calls. The reasoning split runs first: Qwen3.5's is
// Qwen3's; Nemotron 3's keeps the reasoning's trailing newline (nemotron3.ts).
import type { AssistantTurn, ParseContext, ParsedCompletion, ToolCall, ToolCallIdSource } from "./family.ts";
import { newToolCallId } from "./tool-call-id.ts";
import { argumentsObject, argumentText, parameterTypes, qwen3CoderArgumentValue } from "./tool-args.ts";

const CALL_OPEN = "<tool_call>";
const CALL_CLOSE = "</tool_call>";
const FUNCTION_OPEN = "<function=";
const FUNCTION_CLOSE = "</function>";
const PARAM_OPEN = "<parameter=";
const PARAM_CLOSE = "</parameter>";

/** One call as the templates write it: `<tool_call>\n<function=N>\n<parameter=K>\nV\n</parameter>\n…</function>\n</tool_call>`. */
export function formatCoderCall(call: NonNullable<AssistantTurn["tool_calls"]>[number]): string {
  let text = `${CALL_OPEN}\n${FUNCTION_OPEN}${call.function.name}>\n`;
  for (const [key, value] of Object.entries(argumentsObject(call.function.arguments)))
    text += `${PARAM_OPEN}${key}>\n${argumentText(value)}\n${PARAM_CLOSE}\n`;
  return `${text}${FUNCTION_CLOSE}\n${CALL_CLOSE}`;
}

/** A reasoning split: the reasoning ("" when none) and the text after it. */
export type ReasoningSplit = (text: string) => { reasoning: string; rest: string };

/**
 * Parses a completion whose stop text is already cut: `split` takes the reasoning off,
 * the rest is trimmed (SGLang strips the text after the reasoning) and its calls parsed.
 */
export function parseCoderCompletion(text: string, split: ReasoningSplit, context?: ParseContext): ParsedCompletion {
  const { reasoning, rest } = split(text);
  const { content, calls, malformed } = splitCoderCalls(rest.trim(), context?.tools, context?.newId ?? newToolCallId);
  const parsed: ParsedCompletion = { content, malformedToolCalls: malformed };
  if (reasoning) parsed.reasoning_content = reasoning;
  if (calls.length > 0) parsed.tool_calls = calls;
  return parsed;
}

function splitCoderCalls(
  text: string,
  tools: readonly unknown[] | undefined,
  newId: ToolCallIdSource,
): { content: string; calls: ToolCall[]; malformed: number } {
  let content = "";
  const calls: ToolCall[] = [];
  let malformed = 0;
  let at = 0;
  // Before the first call all text is content; after it, only what is not bare separator whitespace.
  const keep = (gap: string) => {
    if (calls.length === 0 || gap.trim() !== "") content += gap;
  };
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
      keep(text.slice(at, reopen));
      malformed++;
      at = reopen;
      continue;
    }
    const end = close + CALL_CLOSE.length;
    const found = blockCalls(text.slice(bodyStart, close), tools, newId);
    if (found.length > 0) {
      keep(text.slice(at, open));
      calls.push(...found);
    } else {
      keep(text.slice(at, end));
      malformed++;
    }
    at = end;
  }
  keep(text.slice(at));
  return { content, calls, malformed };
}

/** Where the first of `tags` occurs in `text` from `from`, else the end of the text. */
function firstOf(text: string, from: number, tags: readonly string[]): number {
  let best = text.length;
  for (const tag of tags) {
    const i = text.indexOf(tag, from);
    if (i !== -1 && i < best) best = i;
  }
  return best;
}

/** The calls in one block's body: each `<function=NAME>` up to `</function>` (or the body's end). */
function blockCalls(body: string, tools: readonly unknown[] | undefined, newId: ToolCallIdSource): ToolCall[] {
  const calls: ToolCall[] = [];
  let at = body.indexOf(FUNCTION_OPEN);
  while (at !== -1) {
    const start = at + FUNCTION_OPEN.length;
    const close = body.indexOf(FUNCTION_CLOSE, start);
    const fn = body.slice(start, close === -1 ? body.length : close);
    const nameEnd = fn.indexOf(">");
    const name = nameEnd === -1 ? "" : fn.slice(0, nameEnd);
    // A function with no name (or no ">") makes no call; SGLang skips it too.
    if (name !== "") {
      const args = functionArguments(fn.slice(nameEnd + 1), name, tools);
      calls.push({ id: newId(), type: "function", function: { name, arguments: JSON.stringify(args) } });
    }
    if (close === -1) break;
    at = body.indexOf(FUNCTION_OPEN, close + FUNCTION_CLOSE.length);
  }
  return calls;
}

/** `<parameter=KEY>VALUE` runs: a value ends at `</parameter>`, the next `<parameter=`, or the end. */
function functionArguments(
  params: string,
  name: string,
  tools: readonly unknown[] | undefined,
): Record<string, unknown> {
  // No prototype: a parameter named "__proto__" is an ordinary key.
  const args = Object.create(null) as Record<string, unknown>;
  let at = params.indexOf(PARAM_OPEN);
  while (at !== -1) {
    const start = at + PARAM_OPEN.length;
    const end = firstOf(params, start, [PARAM_CLOSE, PARAM_OPEN]);
    const match = params.slice(start, end);
    const keyEnd = match.indexOf(">");
    if (keyEnd !== -1) {
      const key = match.slice(0, keyEnd);
      let value = match.slice(keyEnd + 1);
      if (value.startsWith("\n")) value = value.slice(1);
      if (value.endsWith("\n")) value = value.slice(0, -1);
      args[key] = qwen3CoderArgumentValue(value, parameterTypes(tools, name, key));
    }
    at = params.indexOf(PARAM_OPEN, params.startsWith(PARAM_CLOSE, end) ? end + PARAM_CLOSE.length : end);
  }
  return args;
}
