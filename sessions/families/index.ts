// TITO model families: the per-model rules for joining a generated completion to the
// tokens appended after it (the boundary fix), how many trailing tokens a prefix check
// may ignore, and which segments of a trajectory are assistant text (for drift reports).
// A family never tokenizes or renders anything itself; it only reasons over token ids.
import { SessionConfigError } from "../errors.ts";
import type { TokenizerFolder } from "../tokenizer-folder.ts";

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

const defaultFamily: TitoFamily = {
  name: "default",
  maxTrimTokens: 0,
  trailingTokenIds: new Set(),
  boundaryIds: () => [],
  // Without model knowledge the best signal is a role header that starts the segment.
  isAssistantSegment: (prevSpecial, text) => prevSpecial !== undefined && /^\s*assistant\b/.test(text),
};

function qwen3Family(imStart: number, imEnd: number, newline: number): TitoFamily {
  return {
    name: "qwen3",
    maxTrimTokens: 1,
    trailingTokenIds: new Set([newline]),
    // The model stops at <|im_end|>, the template writes "<|im_end|>\n": put the newline back.
    boundaryIds: (accumulated) =>
      accumulated.length > 0 && accumulated[accumulated.length - 1] === imEnd ? [newline] : [],
    isAssistantSegment: (prevSpecial, text) => prevSpecial === imStart && text.startsWith("assistant"),
  };
}

/** Picks a family by name, or detects it: qwen3 when the tokenizer has <|im_start|>/<|im_end|>. */
export function selectFamily(folder: TokenizerFolder, name?: TitoFamilyName): TitoFamily {
  const imStart = folder.tokenId("<|im_start|>");
  const imEnd = folder.tokenId("<|im_end|>");
  const newline = folder.encode("\n");
  const qwenCapable = imStart !== undefined && imEnd !== undefined && newline.length === 1;
  if (name === "default") return defaultFamily;
  if (name === "qwen3" || (name === undefined && qwenCapable)) {
    if (!qwenCapable)
      throw new SessionConfigError(
        `tito family qwen3 needs <|im_start|>, <|im_end|> and a one-token newline in ${folder.dir}`,
      );
    return qwen3Family(imStart!, imEnd!, newline[0]!);
  }
  if (name !== undefined) throw new SessionConfigError(`unknown tito family: ${String(name)}`);
  return defaultFamily;
}
