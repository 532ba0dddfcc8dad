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
import type { AssistantTurn, TitoFamily } from "./family.ts";
import { formatCoderCall, parseCoderCompletion } from "./qwen3-coder-completion.ts";
import { QWEN3_STREAM_SYNTAX, withoutStopText } from "./qwen3-completion.ts";

const THINK_OPEN = "<think>";
const THINK_CLOSE = "</think>";
const CALL_OPEN = "<tool_call>";

/** The `nemotron_3` split; `promptOpened`: the generation prompt ended with `<think>\n`. */
export function splitNemotronReasoning(text: string, promptOpened: boolean): { reasoning: string; rest: string } {
  let inner = text.trimStart();
  const opened = promptOpened || inner.startsWith(THINK_OPEN);
  while (inner.startsWith(THINK_OPEN)) inner = inner.slice(THINK_OPEN.length);
  const close = inner.indexOf(THINK_CLOSE);
  const call = inner.indexOf(CALL_OPEN);
  const reasoning = (end: number) => inner.slice(0, end).replace(/^\n+/, "");
  if (opened) {
    if (close !== -1) return { reasoning: reasoning(close), rest: inner.slice(close + THINK_CLOSE.length) };
    if (call !== -1) return { reasoning: reasoning(call), rest: inner.slice(call) };
    return { reasoning: reasoning(inner.length), rest: "" };
  }
  // A "</think>" before any call with no "<think>": the prompt opened the block after all.
  if (close !== -1 && (call === -1 || close < call))
    return { reasoning: reasoning(close), rest: inner.slice(close + THINK_CLOSE.length) };
  return { reasoning: "", rest: text };
}

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
    parseCompletion: (text, context) =>
      parseCoderCompletion(
        withoutStopText(text),
        (t) => splitNemotronReasoning(t, context?.kwargs?.enable_thinking !== false),
        context,
      ),
    // Qwen3's markers: the same think tags, stop texts and <tool_call> blocks.
    streamSyntax: QWEN3_STREAM_SYNTAX,
    formatCompletion: formatNemotron3,
  };
}
