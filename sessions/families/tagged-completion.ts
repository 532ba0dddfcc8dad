// One parser for the completions written as tagged text: a completion's decoded text (special
// tokens kept) is split into reasoning, tool calls and content by the family's description
// (completion-formats.ts): the stop texts the engine may leave at the end, the reasoning
// tags and how the generation prompt opened them, and the tool-call block tags with the
// argument syntax inside a block (tool-call-syntax.ts). The streamed reply's markers
// (completion-stream.ts) come from the same description.
// House rules, the same for every family (SGLang's parsers differ from them on purpose): a
// block that does not parse stays in the content verbatim and is counted in
// malformedToolCalls (SGLang drops it); a block the length limit left unclosed stays in the
// content uncounted (the finish reason says so); a block opened again before it closed is
// malformed up to the second opener, which starts over; text after the calls stays in the
// content. The client sees everything the model wrote.
// Formats that differ in kind keep their own parser: Llama 3's bare JSON calls
// (llama3-completion.ts), DeepSeek's DSML (dsml-completion.ts), Kimi's call sections
// (kimi-completion.ts, which takes its reasoning split from here) and Inkling's typed blocks.
import { stripNewlines } from "./chatml.ts";
import type { ParseContext, ParsedCompletion, StreamSyntax, TitoFamily, ToolCall } from "./family.ts";
import { newToolCallId } from "./tool-call-id.ts";
import { ARGUMENT_SYNTAX, type ArgumentSyntax } from "./tool-call-syntax.ts";

type Kwargs = Readonly<Record<string, unknown>> | undefined;

/** How the text of a reasoning block is kept: as SGLang's reasoning parser of the family strips it. */
export type ReasoningStrip = "newlines" | "leading-newlines" | "whitespace" | "none";

export interface ReasoningTags {
  readonly open: string;
  readonly close: string;
  /**
   * Openers the model may write itself: "repeated" (after leading whitespace, any number),
   * "one" (after leading whitespace, one), "exact" (one, at the very start).
   */
  readonly opener: "repeated" | "one" | "exact";
  /**
   * Where a tool-call opener ends the reasoning: "first" (when it comes before the closer),
   * "unclosed" (only when the closer never comes; a call the model only thought about stays).
   */
  readonly callEnds: "first" | "unclosed";
  readonly strip: ReasoningStrip;
  /**
   * Whether the generation prompt (rendered with these kwargs) opened the block, so the
   * completion starts inside it; undefined: reasoning is off, nothing is split at all.
   */
  promptOpened(kwargs: Kwargs): boolean | undefined;
  /**
   * When the prompt did not open the block and the model wrote no opener: whether a closer
   * (before any call) still ends a reasoning, and whether that reasoning is read from the
   * text with its leading whitespace trimmed ("trimmed") or as it is ("text"); absent: never.
   */
  loneClose?(kwargs: Kwargs): "text" | "trimmed" | false;
  /**
   * "content": the reasoning is not split out (MiniMax's `minimax-append-think`): the text up
   * to the closer, with the opener put in front, is content, and calls are looked for after it.
   */
  readonly keep?: "content";
}

export interface ToolCallBlocks {
  readonly open: string;
  readonly close: string;
  /** What stands between the block tags. */
  readonly syntax: ArgumentSyntax;
  /**
   * The content around the calls: "trimmed" (the whole content trimmed, as SGLang trims it),
   * "verbatim", or "between-calls" (the text after the reasoning trimmed, then whitespace
   * that only separates calls dropped; Qwen3-Coder).
   */
  readonly content: "trimmed" | "verbatim" | "between-calls";
}

/** A family's completion format, as data. */
export interface TaggedFormat {
  /** The stop tokens' texts the engine may leave at the end: cut off, repeatedly. */
  readonly stopTexts: readonly string[];
  readonly reasoning?: ReasoningTags;
  readonly toolCalls?: ToolCallBlocks;
}

/** Cuts the stop texts off the end of `text`, as many as there are, in any order. */
export function withoutStopTexts(text: string, stops: readonly string[]): string {
  for (let cut = true; cut;) {
    cut = false;
    for (const stop of stops)
      if (stop !== "" && text.endsWith(stop)) {
        text = text.slice(0, -stop.length);
        cut = true;
      }
  }
  return text;
}

const STRIP: Record<ReasoningStrip, (text: string) => string> = {
  newlines: stripNewlines,
  "leading-newlines": (text) => text.replace(/^\n+/, ""),
  whitespace: (text) => text.trim(),
  none: (text) => text,
};

export interface ReasoningSplit {
  reasoning: string;
  rest: string;
}

/**
 * Splits the reasoning off the front of `text`. It ends at the closer, or at the tool-call
 * opener `callOpen` (see `callEnds`); left open at the end (a length cut), all of it is reasoning.
 */
export function splitReasoning(
  text: string,
  r: ReasoningTags,
  callOpen: string | undefined,
  kwargs: Kwargs,
): ReasoningSplit {
  const promptOpened = r.promptOpened(kwargs);
  if (promptOpened === undefined) return { reasoning: "", rest: text };
  const strip = STRIP[r.strip];
  let inner = r.opener === "exact" ? text : text.trimStart();
  const led = inner.startsWith(r.open);
  if (led) inner = inner.slice(r.open.length);
  while (led && r.opener === "repeated" && inner.startsWith(r.open)) inner = inner.slice(r.open.length);
  const find = (s: string, tag: string | undefined) => (tag === undefined ? -1 : s.indexOf(tag));
  if (!promptOpened && !led) {
    // A closer with no opener: the model's own block after a prompt that did not open one.
    // One that comes only after a tool call opened is inside that call instead.
    const from = r.loneClose?.(kwargs);
    if (!from) return { reasoning: "", rest: text };
    const source = from === "trimmed" ? inner : text;
    const close = find(source, r.close);
    const call = find(source, callOpen);
    if (close !== -1 && (call === -1 || close < call))
      return { reasoning: strip(source.slice(0, close)), rest: source.slice(close + r.close.length) };
    return { reasoning: "", rest: text };
  }
  const close = find(inner, r.close);
  const call = find(inner, callOpen);
  if (close !== -1 && (r.callEnds === "unclosed" || call === -1 || close < call))
    return { reasoning: strip(inner.slice(0, close)), rest: inner.slice(close + r.close.length) };
  // Never closed: the model went straight to a tool call (SGLang ends reasoning there too),
  // or the length limit cut it short inside its reasoning.
  if (call !== -1) return { reasoning: strip(inner.slice(0, call)), rest: inner.slice(call) };
  return { reasoning: strip(inner), rest: "" };
}

interface Blocks {
  content: string;
  calls: ToolCall[];
  malformed: number;
}

/** The calls in `text`'s blocks, and the content around them (see ToolCallBlocks.content). */
export function splitToolCalls(text: string, blocks: ToolCallBlocks, context: ParseContext): Blocks {
  const { open: OPEN, close: CLOSE } = blocks;
  const parseBody = ARGUMENT_SYNTAX[blocks.syntax];
  const newId = context.newId ?? newToolCallId;
  const out: Blocks = { content: "", calls: [], malformed: 0 };
  // "between-calls": before the first call all text is content; after it, only what is not bare separator whitespace.
  const keep = (gap: string) => {
    if (blocks.content !== "between-calls" || out.calls.length === 0 || gap.trim() !== "") out.content += gap;
  };
  if (blocks.content === "between-calls") text = text.trim();
  let at = 0;
  for (;;) {
    const open = text.indexOf(OPEN, at);
    if (open === -1) break;
    const bodyStart = open + OPEN.length;
    const close = text.indexOf(CLOSE, bodyStart);
    // Unclosed at the end: the length limit cut the block short; not counted.
    if (close === -1) break;
    const reopen = text.indexOf(OPEN, bodyStart);
    if (reopen !== -1 && reopen < close) {
      // Opened again before it closed: this opener is malformed, the next one starts over.
      keep(text.slice(at, reopen));
      out.malformed++;
      at = reopen;
      continue;
    }
    const end = close + CLOSE.length;
    const found = parseBody(text.slice(bodyStart, close), context.tools);
    if (found) {
      keep(text.slice(at, open));
      for (const fn of found) out.calls.push({ id: newId(), type: "function", function: fn });
    } else {
      keep(text.slice(at, end));
      out.malformed++;
    }
    at = end;
  }
  keep(text.slice(at));
  if (blocks.content === "trimmed") out.content = out.content.trim();
  return out;
}

/** Parses a completion by its family's format. */
export function parseTagged(text: string, format: TaggedFormat, context: ParseContext = {}): ParsedCompletion {
  text = withoutStopTexts(text, format.stopTexts);
  const r = format.reasoning;
  let kept = "";
  let reasoning = "";
  if (r?.keep === "content") {
    // The prompt's opener is put back in front; calls count only after the closer.
    if (!text.startsWith(r.open)) text = r.open + text;
    const close = text.indexOf(r.close);
    const callsFrom = close === -1 ? 0 : close + r.close.length;
    kept = text.slice(0, callsFrom);
    text = text.slice(callsFrom);
  } else if (r) ({ reasoning, rest: text } = splitReasoning(text, r, format.toolCalls?.open, context.kwargs));
  const { content, calls, malformed } = format.toolCalls
    ? splitToolCalls(text, format.toolCalls, context)
    : { content: text, calls: [], malformed: 0 };
  const parsed: ParsedCompletion = { content: kept + content, malformedToolCalls: malformed };
  if (reasoning) parsed.reasoning_content = reasoning;
  if (calls.length > 0) parsed.tool_calls = calls;
  return parsed;
}

/** The markers parseTagged reacts to in a format: a streamed reply is parsed with them. */
export function streamSyntaxOf(format: TaggedFormat): StreamSyntax {
  const r = format.reasoning;
  const calls = format.toolCalls;
  return {
    blocks: calls ? [{ open: [calls.open], close: [calls.close] }] : [],
    markers: [...(r ? [r.open, r.close] : []), ...format.stopTexts],
  };
}

/** parseCompletion and streamSyntax of a family whose completions are tagged text. */
export function taggedParsing(format: TaggedFormat): Pick<TitoFamily, "parseCompletion" | "streamSyntax"> {
  return {
    parseCompletion: (text, context) => parseTagged(text, format, context),
    streamSyntax: streamSyntaxOf(format),
  };
}
