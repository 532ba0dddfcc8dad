// The Qwen3.5 family (docs/models.md): ChatML turns on a new ~248k vocabulary, tool calls
// in Qwen3-Coder XML, its own append-only template (qwen35-template.ts) with clear_thinking
// pinned false. The template refuses a system message after the first, so a later turn may
// append tool, user and assistant messages only. With thinking on (the default) the
// generation prompt opens `<think>\n`: the completion starts inside its reasoning.
// Completions are parsed by their format (completion-formats.ts): Qwen3's reasoning split, Qwen3-Coder XML calls.
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import { chatmlBasics } from "./chatml.ts";
import type { AssistantTurn, TitoFamily } from "./family.ts";
import { QWEN35_FORMAT } from "./completion-formats.ts";
import { QWEN35_TEMPLATE } from "./qwen35-template.ts";
import { taggedParsing } from "./tagged-completion.ts";
import { formatCoderCall } from "./tool-call-syntax.ts";

/**
 * What the model writes after the generation prompt, as the template renders the turn:
 * `{reasoning}\n</think>\n\n` (thinking on; the prompt wrote `<think>\n`), the trimmed
 * content, then the calls, the first after `\n\n` when there is content, the others after `\n`.
 */
function formatQwen35(turn: AssistantTurn, kwargs?: Readonly<Record<string, unknown>>): string {
  const content = turn.content.trim();
  let text = kwargs?.enable_thinking === false ? "" : `${(turn.reasoning_content ?? "").trim()}\n</think>\n\n`;
  text += content;
  turn.tool_calls?.forEach((call, i) => {
    text += (i > 0 ? "\n" : content ? "\n\n" : "") + formatCoderCall(call);
  });
  return text;
}

export function qwen35Family(folder: TokenizerFolder): TitoFamily {
  return {
    name: "qwen35",
    ...chatmlBasics(folder, "qwen35", "assistant"),
    appendRoles: ["tool", "user", "assistant"],
    pinnedKwargs: { clear_thinking: false },
    template: QWEN35_TEMPLATE,
    sglangParsers: { reasoning: "qwen3", toolCall: "qwen3_coder" },
    ...taggedParsing(QWEN35_FORMAT),
    formatCompletion: formatQwen35,
  };
}
