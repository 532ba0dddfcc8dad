// The GLM-4.7 / GLM-5.x family (HF native template; docs/models.md). Role tokens
// (`<|system|>`, `<|user|>`, `<|assistant|>`, `<|observation|>`) open a message with no
// newline and nothing ends one: the model stops by writing the next message's opener,
// `<|observation|>` after a tool call or `<|user|>` after an answer. The next prompt
// therefore drops that last id and lets the increment write the opener the request really
// needs (the same one, or `<|user|>`/`<|system|>` after a failed call), so a checkpoint may
// lose one trailing id (maxTrimTokens 1). Completions are parsed by GLM47_FORMAT (completion-formats.ts).
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import { GLM47_FORMAT } from "./completion-formats.ts";
import type { AssistantTurn, TitoFamily } from "./family.ts";
import { flaggedSpecialIds, requireTokens } from "./folder-tokens.ts";
import { taggedParsing } from "./tagged-completion.ts";
import { argumentsObject, argumentText } from "./tool-args.ts";

/**
 * What the model writes after the generation prompt (`<|assistant|><think>`, or
 * `<|assistant|></think>` with thinking off), as the template renders the turn in history:
 * `{reasoning}</think>` (thinking on), the trimmed content, then each call as
 * `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…</tool_call>` (strings raw,
 * other values as JSON). An empty reasoning is written `</think>` right after `<think>`,
 * which history renders without the `<think>`: a soft assistant-text drift.
 */
function formatGlm47(turn: AssistantTurn, kwargs?: Readonly<Record<string, unknown>>): string {
  let text = kwargs?.enable_thinking === false ? "" : `${(turn.reasoning_content ?? "").trim()}</think>`;
  text += turn.content.trim();
  for (const call of turn.tool_calls ?? []) {
    text += `<tool_call>${call.function.name}`;
    for (const [key, value] of Object.entries(argumentsObject(call.function.arguments)))
      text += `<arg_key>${key}</arg_key><arg_value>${argumentText(value)}</arg_value>`;
    text += "</tool_call>";
  }
  return text;
}

/** Tokens written only inside an assistant turn: where a tokenizer flags them special, the text after them is still the assistant's. */
const ASSISTANT_INNER = [
  "<think>",
  "</think>",
  "<tool_call>",
  "</tool_call>",
  "<arg_key>",
  "</arg_key>",
  "<arg_value>",
  "</arg_value>",
];

export function glm47Family(folder: TokenizerFolder): TitoFamily {
  requireTokens(folder, "glm47", ["[gMASK]", "<|user|>", "<|assistant|>", "<|observation|>"]);
  const user = folder.tokenId("<|user|>")!;
  const assistant = folder.tokenId("<|assistant|>")!;
  const observation = folder.tokenId("<|observation|>")!;
  const assistantSegments = flaggedSpecialIds(folder, ASSISTANT_INNER, new Set([assistant]));
  const openers = new Set([observation, user]);
  return {
    name: "glm47",
    maxTrimTokens: 1,
    trailingTokenIds: openers,
    appendRoles: ["tool", "user", "system", "assistant"],
    // The native template drops the reasoning of assistants before the last user message
    // unless clear_thinking is false: a new user turn would rewrite history.
    pinnedKwargs: { clear_thinking: false },
    sglangParsers: { reasoning: "glm45", toolCall: "glm47" },
    stopTokens: ["<|observation|>", "<|user|>"],
    boundaryIds: () => [],
    // Always, whichever opener follows: the increment renders the one the request needs.
    boundaryDrop: (accumulated) =>
      accumulated.length > 0 && openers.has(accumulated[accumulated.length - 1]!) ? 1 : 0,
    isAssistantSegment: (prevSpecial) => prevSpecial !== undefined && assistantSegments.has(prevSpecial),
    ...taggedParsing(GLM47_FORMAT),
    formatCompletion: formatGlm47,
  };
}
