// The simulated engine's raw-reply mode (SimEngineOptions.rawReplies, sim-engine.ts): the
// generation routes answer from a request's raw bytes, which the engine then never parses.
// The benchmarks' pre-built replies (bench/sim-engine-prebuilt.ts) are the one replier.
import type { TokenizerFolder } from "../../sessions/tokenizer-folder.ts";

/** A generation API a raw reply answers. */
export type RawApi = "chat" | "generate" | "completions";

/** Replies made from a request's raw bytes. */
export interface RawReplier {
  reply(api: RawApi, body: Buffer): { chunks: Buffer[]; length: number };
}

/** Builds a RawReplier over the engine's tokenizer and served model name. */
export type RawReplies = (folder: TokenizerFolder, model: string) => RawReplier;
