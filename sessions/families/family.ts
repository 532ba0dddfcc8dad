// What a TITO model family is: the per-model rules for joining a generated completion to
// the tokens appended after it (the boundary fix), how many trailing tokens a prefix check
// may ignore, which segments of a trajectory are assistant text (for drift reports), and
// how a completion's decoded text splits into content, reasoning and tool calls (for the
// token-level engine APIs, whose replies carry only text). A family never tokenizes or
// renders anything itself.

export type TitoFamilyName = "default" | "qwen3";

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

export interface TitoFamily {
  readonly name: TitoFamilyName;
  /** Trailing tokens of a checkpoint a prefix check may ignore. */
  readonly maxTrimTokens: number;
  /** Token ids the family may add at a boundary; stripped from both tails before drift compare. */
  readonly trailingTokenIds: ReadonlySet<number>;
  /** Ids to insert between the accumulated ids and the next increment. */
  boundaryIds(accumulated: readonly number[]): number[];
  /**
   * Whether a content segment is assistant text: `prevSpecial` is the special token
   * right before it (undefined at the start), `text` the segment's decoded text.
   */
  isAssistantSegment(prevSpecial: number | undefined, text: string): boolean;
  /**
   * Parses a generated completion's text (as the engine decoded it, special tokens kept).
   * `newId` makes the ids of the tool calls found (default: `call_` + 24 random characters).
   */
  parseCompletion(text: string, newId?: ToolCallIdSource): ParsedCompletion;
}
