// What the ChatML families (qwen3, qwennext, qwen35, nemotron3) share: `<|im_start|>{role}\n`
// opens a message and the template writes `<|im_end|>\n` after it, but the model stops at
// `<|im_end|>`, so the boundary puts the newline back before what follows (docs/models.md);
// the newline is the trailing id drift reports strip. A segment is the assistant's
// when it follows `<|im_start|>` and starts with the family's assistant role text, or
// follows an in-turn tag (`<think>`, `<tool_call>`, …) that the tokenizer flags special.
import { SessionConfigError } from "../errors.ts";
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import type { TitoFamily, TitoFamilyName } from "./family.ts";
import { flaggedSpecialIds } from "./folder-tokens.ts";

/** Tags written only inside an assistant turn. */
const ASSISTANT_INNER = ["<think>", "</think>", "<tool_call>", "</tool_call>"];

/** The ChatML settings of a family: boundary, trim, trailing ids, stop token, assistant segments. */
export type ChatmlBasics = Pick<
  TitoFamily,
  "maxTrimTokens" | "trailingTokenIds" | "stopTokens" | "boundaryIds" | "isAssistantSegment"
>;

/**
 * `assistantStart`: the text after `<|im_start|>` that opens an assistant message, as the
 * family's assistant_start_str has it (`assistant`, or `assistant\n` for Nemotron 3).
 * Throws SessionConfigError when the tokenizer lacks a token the family needs.
 */
export function chatmlBasics(folder: TokenizerFolder, name: TitoFamilyName, assistantStart: string): ChatmlBasics {
  const imStart = folder.tokenId("<|im_start|>");
  const imEnd = folder.tokenId("<|im_end|>");
  const newline = folder.encode("\n");
  if (imStart === undefined || imEnd === undefined || newline.length !== 1)
    throw new SessionConfigError(
      `tito family ${name} needs <|im_start|>, <|im_end|> and a one-token newline in ${folder.dir}`,
    );
  const nl = newline[0]!;
  const inner = flaggedSpecialIds(folder, ASSISTANT_INNER);
  return {
    maxTrimTokens: 0,
    trailingTokenIds: new Set([nl]),
    stopTokens: ["<|im_end|>"],
    // The model stops at <|im_end|>, the template writes "<|im_end|>\n": put the newline back.
    boundaryIds: (accumulated) => (accumulated.length > 0 && accumulated[accumulated.length - 1] === imEnd ? [nl] : []),
    isAssistantSegment: (prevSpecial, text) =>
      prevSpecial !== undefined &&
      ((prevSpecial === imStart && text.startsWith(assistantStart)) || inner.has(prevSpecial)),
  };
}

/** Newlines only, as the templates' `strip('\n')`. */
export function stripNewlines(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && text.charCodeAt(start) === 0x0a) start++;
  while (end > start && text.charCodeAt(end - 1) === 0x0a) end--;
  return text.slice(start, end);
}
