// The DeepSeek-V3.2 and DeepSeek-V4 families (docs/models.md). Both render with an
// encoder written in code (deepseekv32-encoder.ts, deepseekv4-encoder.ts; the models ship
// Python encoders, no jinja template), stop at <｜end▁of▁sentence｜>, which the encoders
// also write after every assistant turn (no boundary fix), split drift segments only at
// <｜User｜>/<｜Assistant｜> (the tokenizer does not flag them special), pin drop_thinking
// false so history reasoning stays (append-only), and treat thinking_mode /
// enable_thinking / thinking as one switch. Later turns are rendered as a diff of the real
// history: V4 folds tool results and user text into one block, and V3.2 writes a tool
// run's closing opener only when something follows it, so neither renders a run alone as
// it renders in context (and V3.2's tool text meets its generation prompt in plain text,
// which must be encoded in one piece). Completions are parsed in dsml-completion.ts.
import { SessionConfigError } from "../errors.ts";
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import {
  ASSISTANT,
  BOS,
  EOS,
  THINK_CLOSE,
  THINK_OPEN,
  THINKING_KWARGS,
  USER,
  dsmlBlock,
  reasoningOf,
  thinkingMode,
  toolCallsOf,
  type Kwargs,
} from "./deepseek-encoding.ts";
import { V32_TOOL_BLOCK, deepseekV32Renderer } from "./deepseekv32-encoder.ts";
import { V4_TOOL_BLOCK, deepseekV4Renderer } from "./deepseekv4-encoder.ts";
import { dsmlStreamSyntax, parseDsmlCompletion, type DsmlDialect } from "./dsml-completion.ts";
import type { AssistantTurn, ChatRenderer, TitoFamily, TitoFamilyName } from "./family.ts";

/** The tokens both encoders write; each must be one token of the folder. */
function tokenIds(folder: TokenizerFolder, family: TitoFamilyName): Record<string, number> {
  const ids: Record<string, number> = {};
  for (const token of [BOS, EOS, USER, ASSISTANT, THINK_OPEN, THINK_CLOSE]) {
    const id = folder.tokenId(token);
    const encoded = id === undefined ? [] : folder.encode(token);
    if (id === undefined || encoded.length !== 1 || encoded[0] !== id)
      throw new SessionConfigError(
        `tito family ${family} needs ${token} as one token of the tokenizer in ${folder.dir}` +
          (token === THINK_OPEN || token === THINK_CLOSE
            ? " (DeepSeek V3.2 has <think>/</think> at ids 128798/128799)"
            : ""),
      );
    ids[token] = id;
  }
  return ids;
}

/** The text the model writes after the generation prompt: `[reasoning</think>]content[tool block]`. */
function formatter(block: string) {
  return (turn: AssistantTurn, kwargs?: Kwargs): string => {
    const thinking = thinkingMode(kwargs ?? {}) === "thinking";
    const message = turn as unknown as Record<string, unknown>;
    return (
      (thinking ? reasoningOf(message) + THINK_CLOSE : "") +
      turn.content +
      dsmlBlock(block, toolCallsOf(message, block === V4_TOOL_BLOCK))
    );
  };
}

interface Variant {
  name: TitoFamilyName;
  renderer: ChatRenderer;
  dialect: DsmlDialect;
  appendRoles: readonly string[];
  /** Whether the generation prompt's tail (<｜Assistant｜>, <think>, </think>) is ignored by drift reports. */
  trailingOpeners: boolean;
  sglangParsers: { reasoning: string; toolCall: string };
}

function deepseekFamily(folder: TokenizerFolder, v: Variant): TitoFamily {
  const ids = tokenIds(folder, v.name);
  const assistant = ids[ASSISTANT]!;
  return {
    name: v.name,
    maxTrimTokens: 0,
    trailingTokenIds: new Set(v.trailingOpeners ? [assistant, ids[THINK_OPEN]!, ids[THINK_CLOSE]!] : []),
    driftSpecialIds: new Set([ids[USER]!, assistant]),
    appendRoles: v.appendRoles,
    pinnedKwargs: { drop_thinking: false },
    kwargAliases: [THINKING_KWARGS],
    engineKwargs: (kwargs) => ({ ...kwargs, thinking: thinkingMode(kwargs) === "thinking" }),
    renderer: v.renderer,
    increment: "history",
    sglangParsers: v.sglangParsers,
    stopTokens: [EOS],
    // The encoders write EOS after every assistant turn, where the model stopped: nothing to add.
    boundaryIds: () => [],
    isAssistantSegment: (prevSpecial) => prevSpecial === assistant,
    parseCompletion: (text, context) => parseDsmlCompletion(text, v.dialect, context),
    streamSyntax: dsmlStreamSyntax(v.dialect),
    formatCompletion: formatter(v.dialect.block),
  };
}

export const deepseekV32Family = (folder: TokenizerFolder): TitoFamily =>
  deepseekFamily(folder, {
    name: "deepseekv32",
    renderer: deepseekV32Renderer,
    dialect: { block: V32_TOOL_BLOCK, strict: false, trimContent: true },
    appendRoles: ["tool", "user", "system", "assistant"],
    trailingOpeners: false,
    sglangParsers: { reasoning: "deepseek-v3", toolCall: "deepseekv32" },
  });

export const deepseekV4Family = (folder: TokenizerFolder): TitoFamily =>
  deepseekFamily(folder, {
    name: "deepseekv4",
    renderer: deepseekV4Renderer,
    dialect: { block: V4_TOOL_BLOCK, strict: true, trimContent: false },
    // A system message renders as bare text with no role token: only the first may be one.
    appendRoles: ["tool", "user", "assistant"],
    trailingOpeners: true,
    sglangParsers: { reasoning: "deepseek-v4", toolCall: "deepseekv4" },
  });
