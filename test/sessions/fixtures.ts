// Shared test fixtures: the bundled Qwen3 folder, loaded once per process (npm test runs
// every file in one process, and a load costs about a second).
import { bundledQwen3Dir, loadTokenizerFolder, type TokenizerFolder } from "../../sessions/tokenizer-folder.ts";

let qwen: TokenizerFolder | undefined;

export function qwen3(): TokenizerFolder {
  qwen ??= loadTokenizerFolder(bundledQwen3Dir());
  return qwen;
}

export const WEATHER_TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};
