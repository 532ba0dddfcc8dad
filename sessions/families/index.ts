// The families' one entry point: select a family by name, or detect it from the tokenizer
// folder's special tokens (and config.json's `model_type` where that is the only tell), in
// the order of docs/models.md. Each family lives in its own file; this one only maps names
// to factories and decides which name a folder gets.
import { SessionConfigError } from "../errors.ts";
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import { defaultFamily } from "./default.ts";
import { deepseekV32Family, deepseekV4Family } from "./deepseek.ts";
import { FAMILY_NAMES, isFamilyName, type FamilyFactory, type TitoFamily, type TitoFamilyName } from "./family.ts";
import { gemma3Family } from "./gemma3.ts";
import { glm47Family } from "./glm47.ts";
import { inklingFamily } from "./inkling.ts";
import { kimi25Family, kimi26Family } from "./kimi.ts";
import { llama3Family } from "./llama3.ts";
import { minimaxM25Family, minimaxM27Family } from "./minimax.ts";
import { nemotron3Family } from "./nemotron3.ts";
import { qwen3Family, qwennextFamily } from "./qwen3.ts";
import { qwen35Family } from "./qwen35.ts";

export type {
  AssistantTurn,
  ChatRenderer,
  ParseContext,
  ParsedCompletion,
  StreamSyntax,
  TitoFamily,
  TitoFamilyName,
  ToolCall,
  ToolCallIdSource,
} from "./family.ts";
export { FAMILY_NAMES, isFamilyName } from "./family.ts";
export { newToolCallId } from "./tool-call-id.ts";

const FACTORIES: Record<TitoFamilyName, FamilyFactory> = {
  default: defaultFamily,
  qwen3: qwen3Family,
  qwennext: qwennextFamily,
  qwen35: qwen35Family,
  nemotron3: nemotron3Family,
  glm47: glm47Family,
  kimi25: kimi25Family,
  kimi26: kimi26Family,
  minimax_m25: minimaxM25Family,
  minimax_m27: minimaxM27Family,
  deepseekv32: deepseekV32Family,
  deepseekv4: deepseekV4Family,
  inkling: inklingFamily,
  llama3: llama3Family,
  gemma3: gemma3Family,
};

const has = (folder: TokenizerFolder, ...tokens: string[]) => tokens.every((t) => folder.tokenId(t) !== undefined);

/** Qwen3's `<|im_start|>` id; Qwen3.5's new vocabulary moved it to 248045. */
const QWEN3_IM_START = 151644;
const QWEN35_IM_START = 248045;

/** The family a tokenizer folder belongs to; `default` when nothing matches. */
export function detectFamily(folder: TokenizerFolder): TitoFamilyName {
  const template = folder.chatTemplate;
  if (has(folder, "<|message_model|>", "<|content_model_end_sampling|>")) return "inkling";
  if (has(folder, "<｜User｜>", "<｜Assistant｜>")) {
    // V3, V3.1 and R1 share these tokens but no registered family: only model_type tells.
    if (folder.modelType === "deepseek_v4") return "deepseekv4";
    if (folder.modelType === "deepseek_v32") return "deepseekv32";
    return "default";
  }
  if (has(folder, "]~b]", "[e~[")) return template.includes("MiniMax-M2.7") ? "minimax_m27" : "minimax_m25";
  if (has(folder, "<|im_assistant|>", "<|im_middle|>", "<|tool_calls_section_begin|>"))
    return template.includes("preserve_thinking") ? "kimi26" : "kimi25";
  if (has(folder, "[gMASK]", "<|observation|>", "<|assistant|>")) return "glm47";
  if (has(folder, "<|im_start|>", "<|im_end|>")) {
    const imStart = folder.tokenId("<|im_start|>");
    if (imStart === QWEN35_IM_START) return "qwen35";
    if (imStart === QWEN3_IM_START) {
      if (/<\|im_start\|>assistant(\\n|\n)<think>(\\n|\n)/.test(template) && !template.includes("enable_thinking"))
        return "qwennext";
      if (template.includes("enable_thinking")) return "qwen3";
      return "default";
    }
    if (template.includes("truncate_history_thinking")) return "nemotron3";
    return "default";
  }
  if (has(folder, "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")) return "llama3";
  if (has(folder, "<start_of_turn>", "<end_of_turn>")) return "gemma3";
  return "default";
}

/** Picks a family by name, or the detected one; an unknown name lists the known ones. */
export function selectFamily(folder: TokenizerFolder, name?: string): TitoFamily {
  if (name !== undefined && !isFamilyName(name))
    throw new SessionConfigError(`unknown tito family ${JSON.stringify(name)}; known: ${FAMILY_NAMES.join(", ")}`);
  const chosen = name ?? detectFamily(folder);
  return FACTORIES[chosen](folder);
}
