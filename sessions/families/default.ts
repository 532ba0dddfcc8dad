// The default family: no model knowledge, so no boundary fix, no trim, no pinned kwargs,
// every role, and no parsers (a completion is all content, verbatim). A segment is
// assistant text when a role header starts it, or when the special token before it names
// the assistant (DeepSeek V3's `<｜Assistant｜>` carries no role word after it).
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import type { TitoFamily } from "./family.ts";
import { NO_BOUNDARY } from "./folder-tokens.ts";

/** Role tokens known to be added without the special flag, and whether each opens assistant text. */
const ROLE_TOKENS: ReadonlyArray<[string, boolean]> = [
  ["<｜User｜>", false],
  ["<｜Assistant｜>", true],
];

export function defaultFamily(folder: TokenizerFolder): TitoFamily {
  const assistantSpecials = new Set<number>();
  for (const id of folder.specialTokenIds) if (/assistant/i.test(folder.decode([id]))) assistantSpecials.add(id);
  // Role tokens some tokenizers add without the special flag (DeepSeek V3/R1): they still
  // delimit turns, so drift segments split at them too.
  const driftSpecialIds = new Set(folder.specialTokenIds);
  for (const [text, assistant] of ROLE_TOKENS) {
    const id = folder.tokenId(text);
    if (id === undefined) continue;
    driftSpecialIds.add(id);
    if (assistant) assistantSpecials.add(id);
  }
  const eos = folder.config.eos_token;
  const eosText = typeof eos === "string" ? eos : (eos as { content?: unknown } | undefined)?.content;
  return {
    name: "default",
    ...NO_BOUNDARY,
    driftSpecialIds,
    appendRoles: ["tool", "user", "system", "assistant"],
    pinnedKwargs: {},
    sglangParsers: {},
    // The only stop the folder names: its eos token.
    stopTokens: typeof eosText === "string" && folder.tokenId(eosText) !== undefined ? [eosText] : [],
    isAssistantSegment: (prevSpecial, text) =>
      prevSpecial !== undefined && (assistantSpecials.has(prevSpecial) || /^\s*assistant\b/.test(text)),
    parseCompletion: (text) => ({ content: text, malformedToolCalls: 0 }),
    streamSyntax: { blocks: [], markers: [] },
    formatCompletion: (turn) => turn.content,
  };
}
