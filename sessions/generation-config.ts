// The sampling defaults a model ships in its folder's `generation_config.json`
// (`temperature`, `top_p`, `top_k`): vLLM applies them to every request that leaves them
// unset (`--generation-config auto`, its default), and so does SGLang's OpenAI chat route,
// but SGLang's native `/generate` does not (T=1, no top-p/top-k). tito-server reads them once
// and hands them to the engine adapter, which fills in what the client left unset, so the
// same request samples from the same distribution on every `--engine-api`
// (docs/engines.md, "Sampling defaults").
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { SamplingDefaults } from "./engine-port.ts";

const KEYS = ["temperature", "top_p", "top_k"] as const;

/** The folder's generation_config.json sampling defaults; none when it has no such file or no such keys. */
export function readGenerationDefaults(dir: string): SamplingDefaults | undefined {
  const path = join(dir, "generation_config.json");
  if (!existsSync(path)) return undefined;
  let config: unknown;
  try {
    config = JSON.parse(readFileSync(path, "utf8"));
  } catch {
    return undefined; // an unreadable generation config leaves the engine's defaults, as vLLM does
  }
  if (!config || typeof config !== "object") return undefined;
  const out: Record<string, number> = {};
  for (const key of KEYS) {
    const value = (config as Record<string, unknown>)[key];
    if (typeof value === "number" && Number.isFinite(value)) out[key] = value;
  }
  return Object.keys(out).length > 0 ? (out as SamplingDefaults) : undefined;
}
