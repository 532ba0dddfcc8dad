// The Moonshot Kimi K2.5 and K2.6 families (docs/models.md). A message is
// `<|im_user|>` / `<|im_assistant|>` / `<|im_system|>` (tool results too), its name,
// `<|im_middle|>`, the body and `<|im_end|>`, with nothing after it: the model stops at
// `<|im_end|>` and the next message starts right there, so no boundary fix and no trim.
// `<|im_middle|>` only separates a message's name from its body, so drift reports do not
// split at it. Both models' own templates drop the reasoning of every assistant up to the
// last one without tool calls; K2.6's template has a `preserve_thinking` switch for that,
// K2.5's does not, so kimi25 renders with a fixed template that adds it (kimi-template.ts)
// and both pin it true. Completions are parsed in kimi-completion.ts; the call ids the
// client gets are the model's own, as the template prints them back verbatim.
import { SessionConfigError } from "../errors.ts";
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import type { TitoFamily, TitoFamilyName } from "./family.ts";
import { flaggedSpecialIds, NO_BOUNDARY, requireTokens } from "./folder-tokens.ts";
import { formatKimiCompletion, KIMI_STREAM_SYNTAX, parseKimiCompletion } from "./kimi-completion.ts";
import { KIMI_K25_TEMPLATE } from "./kimi-template.ts";

const NEEDED = [
  "<|im_user|>",
  "<|im_assistant|>",
  "<|im_system|>",
  "<|im_middle|>",
  "<|im_end|>",
  "<|tool_calls_section_begin|>",
  "<|tool_calls_section_end|>",
  "<|tool_call_begin|>",
  "<|tool_call_argument_begin|>",
  "<|tool_call_end|>",
];

/** Tokens written only inside an assistant turn: where a tokenizer flags them special, the text after them is still the assistant's. */
const ASSISTANT_INNER = [
  "<think>",
  "</think>",
  "<|tool_calls_section_begin|>",
  "<|tool_call_begin|>",
  "<|tool_call_argument_begin|>",
  "<|tool_call_end|>",
  "<|tool_calls_section_end|>",
];

function kimiFamily(folder: TokenizerFolder, name: TitoFamilyName, template: string | undefined): TitoFamily {
  requireTokens(folder, name, NEEDED);
  const assistant = folder.tokenId("<|im_assistant|>")!;
  const middle = folder.tokenId("<|im_middle|>")!;
  const assistantSegments = flaggedSpecialIds(folder, ASSISTANT_INNER, new Set([assistant]));
  const driftSpecialIds = new Set(folder.specialTokenIds);
  driftSpecialIds.delete(middle);
  return {
    name,
    ...NO_BOUNDARY,
    driftSpecialIds,
    appendRoles: ["tool", "user", "system", "assistant"],
    pinnedKwargs: { preserve_thinking: true },
    template,
    sglangParsers: name === "kimi26" ? { reasoning: "kimi_k2", toolCall: "kimi_k2_raw_id" } : {},
    stopTokens: ["<|im_end|>"],
    isAssistantSegment: (prevSpecial) => prevSpecial !== undefined && assistantSegments.has(prevSpecial),
    parseCompletion: parseKimiCompletion,
    streamSyntax: KIMI_STREAM_SYNTAX,
    formatCompletion: formatKimiCompletion,
  };
}

/** K2.5: its own template cannot keep history thinking, so the fixed one renders. */
export const kimi25Family = (folder: TokenizerFolder): TitoFamily => kimiFamily(folder, "kimi25", KIMI_K25_TEMPLATE);

/** K2.6: the folder's own template, which must have the preserve_thinking switch the family pins. */
export function kimi26Family(folder: TokenizerFolder): TitoFamily {
  if (!folder.chatTemplate.includes("preserve_thinking"))
    throw new SessionConfigError(
      `tito family kimi26 renders with the chat template of ${folder.dir}, which has no preserve_thinking switch (a Kimi K2.5 template? use kimi25)`,
    );
  return kimiFamily(folder, "kimi26", undefined);
}
