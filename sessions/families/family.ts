// What a TITO model family is: the per-model rules for joining a generated completion to
// the tokens appended after it (the boundary fix), how many trailing tokens a prefix check
// may ignore, which segments of a trajectory are assistant text (for drift reports), which
// roles a later turn may append, the template kwargs it pins, the renderer it needs when
// the folder's own template is not append-only, and how a completion's decoded text splits
// into content, reasoning and tool calls (for the token-level engine APIs, whose replies
// carry only text). Facts per family: docs/models.md.
// A family never tokenizes anything itself.
import type { ChatRenderer } from "../chat-template.ts";
import type { TokenizerFolder } from "../tokenizer-folder.ts";

import type { TitoFamilyName } from "./names.ts";

export { FAMILY_NAMES, isFamilyName, type TitoFamilyName } from "./names.ts";

/** An OpenAI tool call as the server reports it to the client. */
export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export interface ParsedCompletion {
  /** The text that is neither reasoning nor a tool call (a malformed tool-call block stays here). */
  content: string;
  /** Present when the family splits reasoning out and the completion had some. */
  reasoning_content?: string;
  /** Present when the completion called tools; `arguments` is a JSON string. */
  tool_calls?: ToolCall[];
  /** Tool-call blocks that did not parse (left in `content`), for a metric. */
  malformedToolCalls: number;
}

/** Makes a fresh tool-call id (tests pass a deterministic one). */
export type ToolCallIdSource = () => string;

export type { ChatRenderer } from "../chat-template.ts";

/** What a completion parser may need besides the text. */
export interface ParseContext {
  /** The request's `tools` (OpenAI shape): XML-style formats type argument values by their schema. */
  tools?: readonly unknown[];
  /** The turn's effective template kwargs (e.g. whether thinking is on). */
  kwargs?: Readonly<Record<string, unknown>>;
  /** Ids of the tool calls found (default: `call_` + 24 random characters). */
  newId?: ToolCallIdSource;
}

/** An assistant turn as the model writes it: the input of `formatCompletion`. */
export interface AssistantTurn {
  content: string;
  reasoning_content?: string;
  /** `arguments` as an object or a JSON string. */
  tool_calls?: Array<{ id?: string; type?: "function"; function: { name: string; arguments: unknown } }>;
}

/** What a streamed completion's parser needs to know of the family's syntax (completion-stream.ts). */
export interface StreamSyntax {
  /**
   * Tool-call blocks: text from an opener on is held until one of its closers ends the block
   * (`startsOpen`: the generation prompt wrote an opener, so the completion starts inside one).
   */
  readonly blocks: readonly {
    readonly open: readonly string[];
    readonly close: readonly string[];
    readonly startsOpen?: boolean;
  }[];
  /** Every other text parseCompletion reacts to: reasoning delimiters, stop texts. */
  readonly markers: readonly string[];
  /** A completion that starts with one of these may be all tool calls (Llama 3's bare JSON): held until it is whole. */
  readonly leading?: readonly string[];
}

export interface TitoFamily {
  readonly name: TitoFamilyName;
  /** Trailing tokens of a checkpoint a prefix check may ignore (GLM 1: its stop token is the next opener). */
  readonly maxTrimTokens: number;
  /** Token ids the family may add at a boundary; stripped from both tails before drift compare. */
  readonly trailingTokenIds: ReadonlySet<number>;
  /** Ids that split drift segments; undefined: the tokenizer's special tokens. */
  readonly driftSpecialIds?: ReadonlySet<number>;
  /** The roles a later turn may append (the template renders them append-only); the server's default. */
  readonly appendRoles: readonly string[];
  /** Template kwargs merged into every render and forwarded to the engine; a request may not contradict one. */
  readonly pinnedKwargs: Readonly<Record<string, unknown>>;
  /**
   * The kwargs the engine gets as `chat_template_kwargs` for a turn rendered with `kwargs`
   * (default: `kwargs` as they are). DeepSeek adds the effective `thinking` flag, which
   * SGLang's deepseek-v3 reasoning parser needs to split reasoning at all.
   */
  engineKwargs?(kwargs: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>>;
  /** Kwarg names that mean one switch: a request that sets one replaces the server's value of all. */
  readonly kwargAliases?: readonly (readonly string[])[];
  /** Jinja source of the family's own append-only template, used instead of the folder's. */
  readonly template?: string;
  /** A renderer in code; wins over `template`. */
  readonly renderer?: ChatRenderer;
  /**
   * How a later turn's appended messages are rendered: "segments" (default: each run
   * against a small synthetic context) or "history" (the kept history and the request,
   * diffed; for encoders that fold appended messages together, like DeepSeek V4's).
   */
  readonly increment?: "segments" | "history";
  /** SGLang's `--reasoning-parser` / `--tool-call-parser` for sglang-chat mode; undefined: not bound. */
  readonly sglangParsers: { readonly reasoning?: string; readonly toolCall?: string };
  /** The token texts the model ends a turn with (the simulated engine stops at the first). */
  readonly stopTokens: readonly string[];
  /** Ids to insert between the accumulated ids (after any `boundaryDrop`) and the next increment. */
  boundaryIds(accumulated: ArrayLike<number>): number[];
  /**
   * How many trailing ids of the accumulated ids the next prompt leaves out, at most
   * `maxTrimTokens` (GLM: its stop token is also the next message's opener, which the
   * increment renders again, or replaces with another opener). Absent: none.
   */
  boundaryDrop?(accumulated: ArrayLike<number>): number;
  /**
   * Whether a content segment is assistant text: `prevSpecial` is the special token
   * right before it (undefined at the start), `text` the segment's decoded text.
   */
  isAssistantSegment(prevSpecial: number | undefined, text: string): boolean;
  /** Parses a generated completion's text (as the engine decoded it, special tokens kept). */
  parseCompletion(text: string, context?: ParseContext): ParsedCompletion;
  /**
   * The strings parseCompletion reacts to, so a streamed reply can be parsed as it comes;
   * absent: a streamed reply's message is sent once the completion is whole.
   */
  readonly streamSyntax?: StreamSyntax;
  /**
   * The text the model generates for `turn` right after the generation prompt (rendered
   * with `kwargs`), without the stop token: the inverse of parseCompletion. The simulated
   * engine writes its replies with it; round-trip tests check it against the template.
   */
  formatCompletion(turn: AssistantTurn, kwargs?: Readonly<Record<string, unknown>>): string;
}

/** Builds a family for a tokenizer; throws SessionConfigError when the tokenizer lacks a token it needs. */
export type FamilyFactory = (folder: TokenizerFolder) => TitoFamily;
