// Splits an Inkling completion's text (decoded with special tokens kept) into reasoning,
// tool calls and content, as SGLang's `inkling` reasoning parser and tool-call detector do,
// and writes a turn back in that format (formatInklingCompletion).
// The output is a run of blocks `<|message_model|>{header}{kind token}{payload}<|end_message|>`,
// then `<|content_model_end_sampling|>`. The generation prompt already wrote the first
// block's `<|message_model|>`, so the completion starts with that block's header, and is
// parsed as if the opener were there. Blocks route by kind: `<|content_thinking|>` to the
// reasoning, `<|content_text|>` (and any other kind) to the content, and
// `<|content_invoke_tool_json|>` is a call whose payload is `{"name": N, "args": {…}}`, with
// N equal to the block's header when it has one; calls to undeclared tools still count.
// Control tokens never reach the content, except where SGLang keeps them: a
// `<|message_model|>` inside an open block is text the model wrote. House differences from
// SGLang: a call block that does not parse stays in the content as written (and is
// counted), as does one left open at the end (counted only when the stop token follows it:
// without one, the length limit cut it); text after the calls stays in the content.
import type { AssistantTurn, ParseContext, ParsedCompletion, StreamSyntax, ToolCall } from "./family.ts";
import { newToolCallId } from "./tool-call-id.ts";
import { argumentsObject, isObject } from "./tool-args.ts";

const MODEL = "<|message_model|>";
const ROLE_TOKENS = [MODEL, "<|message_user|>", "<|message_system|>", "<|message_tool|>"];
const THINKING = "<|content_thinking|>";
const TEXT = "<|content_text|>";
const INVOKE = "<|content_invoke_tool_json|>";
const KIND_TOKENS = [THINKING, TEXT, INVOKE, "<|content_xml|>", "<|content_image|>", "<|content_invoke_tool_text|>"];
const END = "<|end_message|>";
const END_SAMPLING = "<|content_model_end_sampling|>";
const END_TOKENS = [END, END_SAMPLING];
const CONTROL = new RegExp(
  [...ROLE_TOKENS, ...KIND_TOKENS, ...END_TOKENS, "<|endoftext|>"].map((t) => t.replace(/[|]/g, "\\|")).join("|"),
  "g",
);

type State =
  | { at: "outside" }
  | { at: "header"; start: number; header: string }
  | { at: "block"; kind: "reasoning" | "content"; payload: string }
  | { at: "call"; start: number; header: string; payload: string };

/**
 * The markers parseInklingCompletion reacts to. A block's header is held until its kind
 * token says what the block is (the completion starts inside the first header), and a call
 * block until it ends; text and thinking blocks flow.
 */
export const INKLING_STREAM_SYNTAX: StreamSyntax = {
  blocks: [
    { open: [MODEL], close: KIND_TOKENS, startsOpen: true },
    { open: [INVOKE], close: END_TOKENS },
  ],
  markers: [...ROLE_TOKENS, ...END_TOKENS, "<|endoftext|>"],
};

export function parseInklingCompletion(text: string, context?: ParseContext): ParsedCompletion {
  // With the stop token there, an unclosed call is malformed; without, the length limit may have cut it.
  const stopped = text.endsWith(END_SAMPLING);
  if (stopped) text = text.slice(0, -END_SAMPLING.length);
  const reader = new BlockReader(MODEL + text, context?.newId ?? newToolCallId);
  let at = 0;
  for (const match of reader.source.matchAll(CONTROL)) {
    reader.text(reader.source.slice(at, match.index));
    at = match.index + match[0].length;
    reader.token(match[0], match.index, at);
  }
  reader.text(reader.source.slice(at));
  reader.finish(stopped);
  const parsed: ParsedCompletion = { content: reader.content, malformedToolCalls: reader.malformed };
  if (reader.reasoning) parsed.reasoning_content = reader.reasoning;
  if (reader.calls.length > 0) parsed.tool_calls = reader.calls;
  return parsed;
}

/** Reads the blocks of `source` (the completion after the opener the prompt wrote), one piece at a time. */
class BlockReader {
  reasoning = "";
  content = "";
  readonly calls: ToolCall[] = [];
  malformed = 0;
  #state: State = { at: "outside" };
  readonly source: string;
  readonly #newId: () => string;

  constructor(source: string, newId: () => string) {
    this.source = source;
    this.#newId = newId;
  }

  /** The model's text from `start` to `end` (positions in `source`; the prompt's opener is not part of it). */
  #raw(start: number, end: number): string {
    return this.source.slice(Math.max(start, MODEL.length), end);
  }

  #closeBlock(): void {
    const state = this.#state;
    if (state.at !== "block") return;
    if (state.kind === "reasoning") this.reasoning += state.payload;
    else this.content += state.payload;
  }

  text(piece: string): void {
    const state = this.#state;
    if (state.at === "outside") this.content += piece;
    else if (state.at === "header") state.header += piece;
    else state.payload += piece;
  }

  token(token: string, start: number, end: number): void {
    let state = this.#state;
    if (state.at === "call") {
      const call = token === END ? toolCall(state.header, state.payload, this.#newId) : undefined;
      if (call) this.calls.push(call);
      else {
        // Not a call: kept as written, up to its end token; any other token starts over outside.
        this.content += this.#raw(state.start, token === END ? end : start);
        this.malformed++;
      }
      this.#state = state = { at: "outside" };
      if (token === END) return;
    }
    if (state.at === "block") {
      if (ROLE_TOKENS.includes(token)) {
        // Inside an open block a message opener is text the model wrote (SGLang keeps it).
        if (token === MODEL) state.payload += token;
        return;
      }
      this.#closeBlock();
      this.#state = state = { at: "outside" };
      if (END_TOKENS.includes(token)) return;
    }
    if (ROLE_TOKENS.includes(token)) this.#state = { at: "header", start, header: "" };
    else if (KIND_TOKENS.includes(token)) {
      const header = state.at === "header" ? state.header : "";
      const blockStart = state.at === "header" ? state.start : start;
      this.#state =
        token === INVOKE
          ? { at: "call", start: blockStart, header, payload: "" }
          : { at: "block", kind: token === THINKING ? "reasoning" : "content", payload: "" };
    } else this.#state = { at: "outside" };
  }

  /**
   * The end of the text: an open block keeps what it has; an open call (or the header of
   * one) stays as written, counted as malformed only when the model `stopped` there (else
   * the length limit cut it).
   */
  finish(stopped: boolean): void {
    const state = this.#state;
    if (state.at === "block") this.#closeBlock();
    else if (state.at === "call" || (state.at === "header" && state.header !== "")) {
      this.content += this.#raw(state.start, this.source.length);
      if (stopped && state.at === "call") this.malformed++;
    }
    this.#state = { at: "outside" };
  }
}

/** A call block: `{"name": N, "args": {…}}` with N the header (when there is one), else undefined. */
function toolCall(header: string, payload: string, newId: () => string): ToolCall | undefined {
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch {
    return undefined;
  }
  if (!isObject(value) || typeof value.name !== "string" || !isObject(value.args)) return undefined;
  const named = header.trim();
  if (named !== "" && named !== value.name) return undefined;
  return { id: newId(), type: "function", function: { name: value.name, arguments: JSON.stringify(value.args) } };
}

/** JSON as the template's canonical macro writes it: compact, object keys sorted by code unit. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (isObject(value))
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`)
      .join(",")}}`;
  return JSON.stringify(value) ?? "null";
}

/**
 * What the model writes after the generation prompt's `<|message_model|>`: the turn's
 * blocks as the template renders them (thinking, text, one per call), less that first
 * opener, without the closing `<|content_model_end_sampling|>`. A turn with nothing in it
 * is "" (the model stops at once; the template renders such a turn as nothing at all).
 */
export function formatInklingCompletion(turn: AssistantTurn): string {
  let text = "";
  if (turn.reasoning_content) text += `${MODEL}${THINKING}${turn.reasoning_content}${END}`;
  if (turn.content) text += `${MODEL}${TEXT}${turn.content}${END}`;
  for (const call of turn.tool_calls ?? []) {
    const name = call.function.name;
    const payload = `{"name":${JSON.stringify(name)},"args":${canonicalJson(argumentsObject(call.function.arguments))}}`;
    text += `${MODEL}${name}${INVOKE}${payload}${END}`;
  }
  return text.startsWith(MODEL) ? text.slice(MODEL.length) : text;
}
