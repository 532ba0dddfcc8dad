// What a TITO model family is: the per-model rules for joining a generated completion to
// the tokens appended after it (the boundary fix), how many trailing tokens a prefix check
// may ignore, and which segments of a trajectory are assistant text (for drift reports).
// A family never tokenizes or renders anything itself; it only reasons over token ids.

export type TitoFamilyName = "default" | "qwen3";

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
}
