// The Qwen3 families (ChatML turns, docs/models.md): `qwen3` (hybrid thinking, the
// enable_thinking switch) and `qwennext` (Qwen3-Thinking-2507 / Qwen3-Next-Thinking: the
// generation prompt always opens `<think>\n`, so the completion starts inside its
// reasoning). Both render with their own append-only template (qwen3-template.ts) with
// clear_thinking pinned false; the boundary is ChatML's (chatml.ts). Completions are parsed
// by their formats in completion-formats.ts (think blocks and <tool_call> JSON blocks).
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import { chatmlBasics, stripNewlines } from "./chatml.ts";
import { QWEN3_FORMAT, QWENNEXT_FORMAT } from "./completion-formats.ts";
import type { AssistantTurn, TitoFamily } from "./family.ts";
import { QWEN3_TEMPLATE, QWENNEXT_TEMPLATE } from "./qwen3-template.ts";
import { taggedParsing, type TaggedFormat } from "./tagged-completion.ts";
import { argumentsObject, templateJson } from "./tool-args.ts";

/** Content and `<tool_call>` JSON blocks as the template writes them (one newline before each call but a first with no content). */
function contentAndCalls(turn: AssistantTurn): string {
  let text = turn.content;
  turn.tool_calls?.forEach((call, i) => {
    if (i > 0 || turn.content) text += "\n";
    const args = templateJson(argumentsObject(call.function.arguments));
    text += `<tool_call>\n{"name": ${JSON.stringify(call.function.name)}, "arguments": ${args}}\n</tool_call>`;
  });
  return text;
}

/**
 * Qwen3 after `<|im_start|>assistant\n`: the think block the template writes for every
 * assistant (clear_thinking=false; empty for reasoning_content ""), then content and
 * calls. With enable_thinking=false the generation prompt already wrote an empty block.
 */
function formatQwen3(turn: AssistantTurn, kwargs?: Readonly<Record<string, unknown>>): string {
  // A turn given without reasoning_content is written without a block (a model asked not
  // to reason, like the simulated engine's chat route); "" writes the empty block.
  const think =
    kwargs?.enable_thinking === false || turn.reasoning_content === undefined
      ? ""
      : `<think>\n${stripNewlines(turn.reasoning_content)}\n</think>\n\n`;
  return think + contentAndCalls(turn);
}

/** Qwen3-Next after `<|im_start|>assistant\n<think>\n`: the rest of the think block, content and calls. */
function formatQwenNext(turn: AssistantTurn): string {
  return `${stripNewlines(turn.reasoning_content ?? "")}\n</think>\n\n${contentAndCalls(turn)}`;
}

/** The two Qwen3 families differ in their template, completion format and what the model writes. */
function qwen3Like(
  folder: TokenizerFolder,
  name: "qwen3" | "qwennext",
  template: string,
  format: TaggedFormat,
  formatCompletion: TitoFamily["formatCompletion"],
): TitoFamily {
  return {
    name,
    ...chatmlBasics(folder, name, "assistant"),
    appendRoles: ["tool", "user", "system", "assistant"],
    // The stock template drops the reasoning of assistants before the last user query: a
    // new user turn would rewrite history. False keeps every think block.
    pinnedKwargs: { clear_thinking: false },
    template,
    sglangParsers: { reasoning: "qwen3", toolCall: "qwen25" },
    ...taggedParsing(format),
    formatCompletion,
  };
}

export const qwen3Family = (folder: TokenizerFolder): TitoFamily =>
  qwen3Like(folder, "qwen3", QWEN3_TEMPLATE, QWEN3_FORMAT, formatQwen3);

/** The generation prompt opened the think block: the completion starts in its reasoning. */
export const qwennextFamily = (folder: TokenizerFolder): TitoFamily =>
  qwen3Like(folder, "qwennext", QWENNEXT_TEMPLATE, QWENNEXT_FORMAT, formatQwenNext);
