// The Qwen3.5 family (docs/models.md): ChatML turns on a new ~248k vocabulary, tool calls
// in Qwen3-Coder XML, its own append-only template (qwen35-template.ts) with clear_thinking
// pinned false. The template refuses a system message after the first, so a later turn may
// append tool, user and assistant messages only. With thinking on (the default) the
// generation prompt opens `<think>\n`: the completion starts inside its reasoning.
// Completions are parsed by qwen3-coder-completion.ts after Qwen3's reasoning split.
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import { chatmlBasics } from "./chatml.ts";
import type { AssistantTurn, TitoFamily } from "./family.ts";
import { formatCoderCall, parseCoderCompletion } from "./qwen3-coder-completion.ts";
import { QWEN3_STREAM_SYNTAX, splitQwen3Reasoning, withoutStopText } from "./qwen3-completion.ts";
import { QWEN35_TEMPLATE } from "./qwen35-template.ts";

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
    parseCompletion: (text, context) =>
      parseCoderCompletion(
        withoutStopText(text),
        (t) => {
          const thinking = context?.kwargs?.enable_thinking !== false;
          return splitQwen3Reasoning(t, thinking, thinking);
        },
        context,
      ),
    // Qwen3's markers: the same think tags, stop texts and <tool_call> blocks.
    streamSyntax: QWEN3_STREAM_SYNTAX,
    formatCompletion: formatQwen35,
  };
}
