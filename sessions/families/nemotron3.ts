// The NVIDIA Nemotron 3 family (docs/models.md): ChatML turns, the boundary inherited from
// Qwen3 (the newline after <|im_end|> put back), the model's own (HF) template with
// truncate_history_thinking pinned false (its default, true, empties the think block of
// every assistant before the last user message), tool calls in Qwen3-Coder XML. The
// assistant start is `<|im_start|>assistant\n`, newline included. In the template's format
// (docs/models.md) an assistant is `<think>\n{reasoning}</think>{content}`, or
// `<think></think>{content}` with no reasoning; a tool-call turn is the trimmed content and
// `\n`, then each call followed by `\n`. The generation prompt is
// `<|im_start|>assistant\n<think>\n` (thinking) or `…<think></think>` (enable_thinking=false).
//
// Reasoning split (SGLang `nemotron_3`): the reasoning ends at `</think>`, or at a
// `<tool_call>` when it never closes; leading newlines are stripped and the trailing newline
// is KEPT, as SGLang's parser keeps it. In Nemotron's format that is what round-trips: the
// model writes `<think>\n` (the prompt) + `r\n</think>`, and `<think>\n` + "r\n" + `</think>`
// renders it back byte for byte. Miles reports the plain-text turn as a soft assistant_text
// drift with the real template, which would then strip the reasoning itself (UNCONFIRMED:
// the Nemotron 3 template text was not available). A turn with no reasoning cannot round
// trip either way: the model writes `<think>\n</think>`, the template `<think></think>`.
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import { chatmlBasics } from "./chatml.ts";
import { NEMOTRON3_FORMAT } from "./completion-formats.ts";
import type { AssistantTurn, TitoFamily } from "./family.ts";
import { taggedParsing } from "./tagged-completion.ts";
import { formatCoderCall } from "./tool-call-syntax.ts";

const THINK_CLOSE = "</think>";

/**
 * What the model writes after the generation prompt, as the template renders the turn:
 * `{reasoning}</think>` (thinking on; the reasoning as given, its trailing newline
 * included), the trimmed content, then `\n` and each call followed by `\n`.
 */
function formatNemotron3(turn: AssistantTurn, kwargs?: Readonly<Record<string, unknown>>): string {
  const content = turn.content.trim();
  let text = kwargs?.enable_thinking === false ? "" : `${turn.reasoning_content ?? ""}${THINK_CLOSE}`;
  text += content;
  const calls = turn.tool_calls ?? [];
  if (calls.length > 0) {
    if (content) text += "\n";
    for (const call of calls) text += `${formatCoderCall(call)}\n`;
  }
  return text;
}

export function nemotron3Family(folder: TokenizerFolder): TitoFamily {
  return {
    name: "nemotron3",
    ...chatmlBasics(folder, "nemotron3", "assistant\n"),
    appendRoles: ["tool", "user", "system", "assistant"],
    pinnedKwargs: { truncate_history_thinking: false },
    sglangParsers: { reasoning: "nemotron_3", toolCall: "qwen3_coder" },
    ...taggedParsing(NEMOTRON3_FORMAT),
    formatCompletion: formatNemotron3,
  };
}
