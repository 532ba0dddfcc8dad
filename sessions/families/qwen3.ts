// The Qwen3 family (ChatML turns): the model stops at <|im_end|> but the template writes
// "<|im_end|>\n" after every turn, so the boundary puts the newline back before what
// follows. Completions are parsed in qwen3-completion.ts (think blocks and <tool_call>
// JSON blocks).
import { SessionConfigError } from "../errors.ts";
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import type { AssistantTurn, TitoFamily } from "./family.ts";
import { parseQwen3Completion } from "./qwen3-completion.ts";

/** JSON with Python's json.dumps separators, as the template's `tojson` writes arguments. */
function pyJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pyJson).join(", ")}]`;
  if (value !== null && typeof value === "object")
    return `{${Object.entries(value as Record<string, unknown>)
      .map(([k, v]) => `${JSON.stringify(k)}: ${pyJson(v)}`)
      .join(", ")}}`;
  return JSON.stringify(value) ?? "null";
}

function formatQwen3(turn: AssistantTurn, kwargs?: Readonly<Record<string, unknown>>): string {
  let text = "";
  if (kwargs?.enable_thinking !== false && turn.reasoning_content !== undefined)
    text += `<think>\n${turn.reasoning_content}\n</think>\n\n`;
  text += turn.content;
  turn.tool_calls?.forEach((call, i) => {
    if (i > 0 || turn.content) text += "\n";
    const args =
      typeof call.function.arguments === "string" ? JSON.parse(call.function.arguments) : call.function.arguments;
    text += `<tool_call>\n{"name": ${JSON.stringify(call.function.name)}, "arguments": ${pyJson(args)}}\n</tool_call>`;
  });
  return text;
}

export function qwen3Family(folder: TokenizerFolder): TitoFamily {
  const imStart = folder.tokenId("<|im_start|>");
  const imEnd = folder.tokenId("<|im_end|>");
  const newline = folder.encode("\n");
  if (imStart === undefined || imEnd === undefined || newline.length !== 1)
    throw new SessionConfigError(
      `tito family qwen3 needs <|im_start|>, <|im_end|> and a one-token newline in ${folder.dir}`,
    );
  const nl = newline[0]!;
  return {
    name: "qwen3",
    maxTrimTokens: 0,
    trailingTokenIds: new Set([nl]),
    appendRoles: ["tool", "user", "system", "assistant"],
    pinnedKwargs: {},
    sglangParsers: { reasoning: "qwen3", toolCall: "qwen25" },
    stopTokens: ["<|im_end|>"],
    // The model stops at <|im_end|>, the template writes "<|im_end|>\n": put the newline back.
    boundaryIds: (accumulated) => (accumulated.length > 0 && accumulated[accumulated.length - 1] === imEnd ? [nl] : []),
    isAssistantSegment: (prevSpecial, text) => prevSpecial === imStart && text.startsWith("assistant"),
    parseCompletion: (text, context) => parseQwen3Completion(text, context?.newId),
    formatCompletion: formatQwen3,
  };
}
