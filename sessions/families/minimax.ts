// The MiniMax M2.5 and M2.7 families (docs/models.md): one tokenizer, one layout, two
// fixed templates that differ only in the default identity sentence (minimax-template.ts).
// `]~b]` opens a message (role word as plain text after it), `[e~[` ends it and is the stop
// token; the template writes `[e~[\n`, so the boundary puts the newline back. A system
// message after the first is dropped by the template: no system appends. Completions are
// parsed by MINIMAX_FORMAT (completion-formats.ts: no reasoning split; XML tool calls).
import { SessionConfigError } from "../errors.ts";
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import { MINIMAX_FORMAT } from "./completion-formats.ts";
import type { AssistantTurn, FamilyFactory, TitoFamily, TitoFamilyName } from "./family.ts";
import { flaggedSpecialIds } from "./folder-tokens.ts";
import { minimaxTemplate } from "./minimax-template.ts";
import { taggedParsing } from "./tagged-completion.ts";
import { argumentsObject, argumentText } from "./tool-args.ts";

/** The newline-only strip of the template's `strip('\n')`. */
const stripNewlines = (s: string) => s.replace(/^\n+/, "").replace(/\n+$/, "");

/**
 * What the model writes after `]~b]ai\n<think>\n`, as the template renders the turn in
 * history: `{reasoning}\n</think>\n\n{content}`, then the calls block. Reasoning missing
 * from the turn is re-split from its content at `</think>`, as the template does. An empty
 * reasoning is written as an empty think block, which history renders with none: a soft
 * assistant-text drift.
 */
function formatMinimax(turn: AssistantTurn): string {
  let content = turn.content;
  let reasoning = turn.reasoning_content ?? "";
  if (turn.reasoning_content === undefined && content.includes("</think>")) {
    const parts = content.split("</think>");
    reasoning = stripNewlines(parts[0]!.split("<think>").pop()!);
    content = stripNewlines(parts[parts.length - 1]!);
  }
  let text = reasoning ? `${reasoning}\n</think>\n\n${content}` : `</think>\n\n${content}`;
  if (turn.tool_calls && turn.tool_calls.length > 0) {
    text += "\n<minimax:tool_call>\n";
    for (const call of turn.tool_calls) {
      text += `<invoke name="${call.function.name}">\n`;
      for (const [key, value] of Object.entries(argumentsObject(call.function.arguments)))
        text += `<parameter name="${key}">${argumentText(value)}</parameter>\n`;
      text += "</invoke>\n";
    }
    text += "</minimax:tool_call>";
  }
  return text;
}

/** Tokens written only inside an assistant turn: where a tokenizer flags them special, the text after them is still the assistant's. */
const ASSISTANT_INNER = ["<think>", "</think>", "<minimax:tool_call>", "</minimax:tool_call>"];

function minimaxFamily(name: TitoFamilyName, model: "MiniMax-M2.5" | "MiniMax-M2.7"): FamilyFactory {
  const template = minimaxTemplate(model);
  return (folder: TokenizerFolder): TitoFamily => {
    const header = folder.tokenId("]~b]");
    const end = folder.tokenId("[e~[");
    const newline = folder.encode("\n");
    if (header === undefined || end === undefined || newline.length !== 1)
      throw new SessionConfigError(`tito family ${name} needs ]~b], [e~[ and a one-token newline in ${folder.dir}`);
    const nl = newline[0]!;
    const assistantSegments = flaggedSpecialIds(folder, ASSISTANT_INNER);
    return {
      name,
      maxTrimTokens: 0,
      trailingTokenIds: new Set([nl]),
      appendRoles: ["tool", "user", "assistant"],
      pinnedKwargs: { clear_thinking: false },
      template,
      sglangParsers: { reasoning: "minimax-append-think", toolCall: "minimax-m2" },
      stopTokens: ["[e~["],
      // The model stops at [e~[, the template writes "[e~[\n": put the newline back.
      boundaryIds: (accumulated) => (accumulated.length > 0 && accumulated[accumulated.length - 1] === end ? [nl] : []),
      isAssistantSegment: (prevSpecial, text) =>
        prevSpecial !== undefined &&
        ((prevSpecial === header && text.startsWith("ai")) || assistantSegments.has(prevSpecial)),
      ...taggedParsing(MINIMAX_FORMAT),
      formatCompletion: formatMinimax,
    };
  };
}

export const minimaxM25Family = minimaxFamily("minimax_m25", "MiniMax-M2.5");
export const minimaxM27Family = minimaxFamily("minimax_m27", "MiniMax-M2.7");
