// The families' one entry point: select a family by name, or detect it from the tokenizer.
import { SessionConfigError } from "../errors.ts";
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import { defaultFamily } from "./default.ts";
import type { TitoFamily, TitoFamilyName } from "./family.ts";
import { qwen3Family } from "./qwen3.ts";

export type { ParsedCompletion, TitoFamily, TitoFamilyName, ToolCall, ToolCallIdSource } from "./family.ts";
export { newToolCallId } from "./tool-call-id.ts";

/** Picks a family by name, or detects it: qwen3 when the tokenizer has <|im_start|>/<|im_end|>. */
export function selectFamily(folder: TokenizerFolder, name?: TitoFamilyName): TitoFamily {
  const imStart = folder.tokenId("<|im_start|>");
  const imEnd = folder.tokenId("<|im_end|>");
  const newline = folder.encode("\n");
  const qwenCapable = imStart !== undefined && imEnd !== undefined && newline.length === 1;
  if (name === "default") return defaultFamily;
  if (name === "qwen3" || (name === undefined && qwenCapable)) {
    if (!qwenCapable)
      throw new SessionConfigError(
        `tito family qwen3 needs <|im_start|>, <|im_end|> and a one-token newline in ${folder.dir}`,
      );
    return qwen3Family(imStart!, imEnd!, newline[0]!);
  }
  if (name !== undefined) throw new SessionConfigError(`unknown tito family: ${String(name)}`);
  return defaultFamily;
}
