// Splits a Kimi K2.5/K2.6 completion's text (decoded with special tokens kept) into
// reasoning, tool calls and content, as SGLang's `kimi_k2` reasoning parser and tool-call
// detector do, and writes a turn back in that format (formatKimiCompletion).
// The generation prompt ends inside `<think>` (thinking on), so the completion starts in
// the reasoning; `</think>` or the tool-call section ends it, and a completion that never
// leaves it is all reasoning (cut by the length limit). With `thinking=false` the prompt
// closed the block already: everything is content.
// Tool calls: `<|tool_calls_section_begin|>` then, per call,
// `<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{JSON}<|tool_call_end|>`,
// then `<|tool_calls_section_end|>`. The template prints a call's id verbatim in history,
// so the id the client gets is the model's own (`kimi_k2_raw_id`); the name is the id
// without `functions.` and `:IDX`. House differences from SGLang: a call that does not
// parse stays in the content verbatim and is counted; one left open at the end stays
// there too, counted only when the stop token follows (without one, the length limit cut
// it); text after the section stays in the content; names may contain `-`.
import { normalizeArguments } from "../chat-template.ts";
import { KIMI_FORMAT } from "./completion-formats.ts";
import type { AssistantTurn, ParseContext, ParsedCompletion, StreamSyntax, ToolCall } from "./family.ts";
import { splitReasoning } from "./tagged-completion.ts";
import { isObject } from "./tool-args.ts";

const [STOP_TEXT] = KIMI_FORMAT.stopTexts;
const { open: THINK_OPEN, close: THINK_CLOSE } = KIMI_FORMAT.reasoning;
const { open: SECTION_BEGIN, close: SECTION_END } = KIMI_FORMAT.sections;
const CALL_BEGIN = "<|tool_call_begin|>";
const ARGUMENT_BEGIN = "<|tool_call_argument_begin|>";
const CALL_END = "<|tool_call_end|>";
const CALL_ID = /^(?:functions\.)?([\w.-]+):(\d+)$/;

/** The markers parseKimiCompletion reacts to (a streamed reply is parsed with them). */
export const KIMI_STREAM_SYNTAX: StreamSyntax = {
  blocks: [{ open: [SECTION_BEGIN], close: [SECTION_END] }],
  markers: [THINK_OPEN, THINK_CLOSE, STOP_TEXT],
};

export function parseKimiCompletion(text: string, context?: ParseContext): ParsedCompletion {
  // With the stop token there, an unclosed call is malformed; without, the length limit may have cut it.
  const stopped = text.endsWith(STOP_TEXT);
  if (stopped) text = text.slice(0, -STOP_TEXT.length);
  const { reasoning, rest } = splitReasoning(text, KIMI_FORMAT.reasoning, SECTION_BEGIN, context?.kwargs);
  const { content, calls, malformed } = splitToolCalls(rest, stopped);
  const parsed: ParsedCompletion = { content, malformedToolCalls: malformed };
  if (reasoning) parsed.reasoning_content = reasoning;
  if (calls.length > 0) parsed.tool_calls = calls;
  return parsed;
}

interface Split {
  content: string;
  calls: ToolCall[];
  malformed: number;
}

function splitToolCalls(text: string, stopped: boolean): Split {
  const out: Split = { content: "", calls: [], malformed: 0 };
  let at = 0;
  for (;;) {
    const open = text.indexOf(SECTION_BEGIN, at);
    if (open === -1) break;
    out.content += text.slice(at, open);
    const bodyStart = open + SECTION_BEGIN.length;
    const close = text.indexOf(SECTION_END, bodyStart);
    const end = close === -1 ? text.length : close + SECTION_END.length;
    const body = text.slice(bodyStart, close === -1 ? text.length : close);
    section(text.slice(open, end), body, close !== -1 || stopped, out);
    at = end;
  }
  out.content += text.slice(at);
  return out;
}

/**
 * One tool-call section: `raw` is all of it, `body` what is between its markers; `closed`
 * when it ends with its marker or the model stopped (else the length limit cut it).
 */
function section(raw: string, body: string, closed: boolean, out: Split): void {
  let content = "";
  const calls: ToolCall[] = [];
  let malformed = 0;
  let at = 0;
  for (;;) {
    const begin = body.indexOf(CALL_BEGIN, at);
    if (begin === -1) break;
    content += body.slice(at, begin);
    const callStart = begin + CALL_BEGIN.length;
    const end = body.indexOf(CALL_END, callStart);
    const reopen = body.indexOf(CALL_BEGIN, callStart);
    if (end === -1 && reopen === -1) {
      // Unclosed: a malformed call when the section closes, the length limit when it does not.
      content += body.slice(begin);
      if (closed) malformed++;
      at = body.length;
      break;
    }
    if (end === -1 || (reopen !== -1 && reopen < end)) {
      // Opened again before it closed: this one is malformed, the next starts over.
      content += body.slice(begin, reopen);
      malformed++;
      at = reopen;
      continue;
    }
    const call = toolCall(body.slice(callStart, end));
    if (call) calls.push(call);
    else {
      content += body.slice(begin, end + CALL_END.length);
      malformed++;
    }
    at = end + CALL_END.length;
  }
  content += body.slice(at);
  if (calls.length === 0) {
    // Nothing called: the section stays as the model wrote it.
    out.content += raw;
    out.malformed += closed ? Math.max(1, malformed) : malformed;
    return;
  }
  out.content += content;
  out.calls.push(...calls);
  out.malformed += malformed;
}

/** `ID<|tool_call_argument_begin|>{JSON object}` (whitespace around either allowed), else undefined. */
function toolCall(body: string): ToolCall | undefined {
  const split = body.indexOf(ARGUMENT_BEGIN);
  if (split === -1 || body.indexOf(ARGUMENT_BEGIN, split + 1) !== -1) return undefined;
  const id = body.slice(0, split).trim();
  const match = CALL_ID.exec(id);
  if (!match) return undefined;
  let args: unknown;
  try {
    args = JSON.parse(body.slice(split + ARGUMENT_BEGIN.length));
  } catch {
    return undefined;
  }
  if (!isObject(args)) return undefined;
  return { id, type: "function", function: { name: match[1]!, arguments: JSON.stringify(args) } };
}

/** Arguments as the template prints them: compact JSON of the object; a string that is not JSON, verbatim. */
function argumentsText(args: unknown): string {
  const value = normalizeArguments(args);
  return typeof value === "string" ? value : (JSON.stringify(value) ?? "null");
}

/**
 * What the model writes after the generation prompt, as the template renders the turn in
 * history: `{reasoning}</think>` (thinking on), the content, then the calls section. A
 * call's id is its own when it has one, else `functions.NAME:IDX` with IDX its position.
 */
export function formatKimiCompletion(turn: AssistantTurn, kwargs?: Readonly<Record<string, unknown>>): string {
  let text = kwargs?.thinking === false ? "" : `${turn.reasoning_content ?? ""}${THINK_CLOSE}`;
  text += turn.content;
  const calls = turn.tool_calls ?? [];
  if (calls.length === 0) return text;
  text += SECTION_BEGIN;
  calls.forEach((call, i) => {
    const id = call.id ?? `functions.${call.function.name}:${i}`;
    text += `${CALL_BEGIN}${id}${ARGUMENT_BEGIN}${argumentsText(call.function.arguments)}${CALL_END}`;
  });
  return text + SECTION_END;
}
