// Each npm tokenizer end to end: the simulated engine writing in the detected family's
// format, a one-worker tito-server tree in this process on the same folder, and a
// multi-turn loop (a tool loop where the family calls tools) checked turn by turn from the
// ids the engine received (test/helpers/family-http.ts). Each folder is loaded once, for
// the engine and the worker both (Gemma 3's takes ~2.5 s and ~300 MB). A new case is a
// folder and the family it must be detected as.
import { test } from "uvu";
import { bundledQwen3Dir } from "../../sessions/tokenizer-folder.ts";
import { deepseekFolder } from "../helpers/deepseek-folder.ts";
import { checkFamilyLoop, startFamilyHarness, type FamilyCase } from "../helpers/family-http.ts";
import { npmFolder, npmTokenizerDir } from "../sessions/fixtures.ts";

const CASES: FamilyCase[] = [
  { label: "Qwen3 (bundled)", dir: bundledQwen3Dir(), family: "qwen3", tools: true, folder: () => npmFolder("qwen3") },
  {
    label: "Llama 3 (npm llama3_1)",
    dir: npmTokenizerDir("llama3_1"),
    family: "llama3",
    tools: true,
    folder: () => npmFolder("llama3_1"),
  },
  {
    label: "Gemma 3 (npm gemma3)",
    dir: npmTokenizerDir("gemma3"),
    family: "gemma3",
    tools: false,
    folder: () => npmFolder("gemma3"),
  },
  {
    label: "DeepSeek V3 (npm deepseek_v3, no config.json)",
    dir: npmTokenizerDir("deepseek_v3"),
    family: "default",
    tools: false,
    folder: () => npmFolder("deepseek_v3"),
  },
  // V3's tokenizer with the think tags named and config.json's model_type (test/helpers/deepseek-folder.ts).
  ...(["deepseek_v32", "deepseek_v4"] as const).map((modelType) => ({
    label: `DeepSeek ${modelType} (remapped npm V3)`,
    dir: () => deepseekFolder(modelType).dir,
    family: modelType === "deepseek_v32" ? ("deepseekv32" as const) : ("deepseekv4" as const),
    tools: true,
    folder: () => deepseekFolder(modelType),
  })),
];

for (const c of CASES)
  test(`${c.label}: detected as ${c.family}; every prompt extends the last, the sample is the engine's ids, drift is soft`, async () => {
    const harness = await startFamilyHarness(c);
    try {
      await checkFamilyLoop(c, harness);
    } finally {
      await harness.close();
    }
  });

test.run();
