// The Qwen3 family (ChatML turns): the model stops at <|im_end|> but the template writes
// "<|im_end|>\n" after every turn, so the boundary puts the newline back before what
// follows; the newline is the one trailing token a prefix check may ignore. Completions
// are parsed in qwen3-completion.ts (think blocks and <tool_call> JSON blocks).
import type { TitoFamily } from "./family.ts";
import { parseQwen3Completion } from "./qwen3-completion.ts";

export function qwen3Family(imStart: number, imEnd: number, newline: number): TitoFamily {
  return {
    name: "qwen3",
    maxTrimTokens: 1,
    trailingTokenIds: new Set([newline]),
    // The model stops at <|im_end|>, the template writes "<|im_end|>\n": put the newline back.
    boundaryIds: (accumulated) =>
      accumulated.length > 0 && accumulated[accumulated.length - 1] === imEnd ? [newline] : [],
    isAssistantSegment: (prevSpecial, text) => prevSpecial === imStart && text.startsWith("assistant"),
    parseCompletion: parseQwen3Completion,
  };
}
