// The Inkling family (docs/models.md; e.g. Inkling-Small). Messages are typed blocks,
// `{role token}{author}{kind token}{payload}<|end_message|>`; a model turn is a run of
// `<|message_model|>` blocks closed by `<|content_model_end_sampling|>`, which is where the
// model stops, and the next message starts right after it: no boundary fix, no trim. The
// family renders with its own template (inkling-template.ts). Drift reports split only at
// the four role tokens, so a message's blocks are one segment per message opener.
// The template writes a one-time effort block before the first non-system message, or
// after the messages when all are system ones. Rendered after the prompt builder's lone
// dummy system message, an appended system message would land before that block, not
// after it (no common prefix), so later turns render the appended messages against the
// real history ("history" increment). Completions are parsed in inkling-completion.ts.
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import type { TitoFamily } from "./family.ts";
import { NO_BOUNDARY, requireTokens } from "./folder-tokens.ts";
import { formatInklingCompletion, INKLING_STREAM_SYNTAX, parseInklingCompletion } from "./inkling-completion.ts";
import { INKLING_TEMPLATE } from "./inkling-template.ts";

const ROLE_TOKENS = ["<|message_user|>", "<|message_model|>", "<|message_system|>", "<|message_tool|>"];
const NEEDED = [
  ...ROLE_TOKENS,
  "<|content_text|>",
  "<|content_thinking|>",
  "<|content_xml|>",
  "<|content_invoke_tool_json|>",
  "<|content_model_end_sampling|>",
  "<|end_message|>",
];

export function inklingFamily(folder: TokenizerFolder): TitoFamily {
  requireTokens(folder, "inkling", NEEDED);
  const model = folder.tokenId("<|message_model|>")!;
  return {
    name: "inkling",
    ...NO_BOUNDARY,
    driftSpecialIds: new Set(ROLE_TOKENS.map((t) => folder.tokenId(t)!)),
    appendRoles: ["tool", "user", "system", "assistant"],
    pinnedKwargs: {},
    template: INKLING_TEMPLATE,
    increment: "history",
    sglangParsers: { reasoning: "inkling", toolCall: "inkling" },
    stopTokens: ["<|content_model_end_sampling|>"],
    isAssistantSegment: (prevSpecial) => prevSpecial === model,
    parseCompletion: parseInklingCompletion,
    streamSyntax: INKLING_STREAM_SYNTAX,
    formatCompletion: formatInklingCompletion,
  };
}
