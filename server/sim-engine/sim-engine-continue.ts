// Continuing a partial completion in the simulated engine, as a real engine does when a
// trainer resumes an aborted request from prompt + the ids generated so far (docs/rl-loop.md,
// "Partial rollouts"). The sim is deterministic per prompt, so a prompt that ends inside an
// assistant message (after the last ChatML generation prompt `<|im_start|>assistant\n`, with
// no `<|im_end|>` after it) is split into the prompt proper and the partial completion: the
// completion is planned from the prompt proper, and when the partial is its beginning the
// reply is the rest of it (`offset` = the partial's length, so positions, logprobs
// included, are those of the uninterrupted run). Anything else is an ordinary prompt.
import type { TokenizerFolder } from "../../sessions/tokenizer-folder.ts";

const GENERATION_PROMPT = "<|im_start|>assistant\n";

/** The prompt proper and the partial completion after its generation prompt (empty when none). */
export function splitPartial(folder: TokenizerFolder, ids: readonly number[]): { base: number[]; partial: number[] } {
  const start = folder.tokenId("<|im_start|>");
  const end = folder.tokenId("<|im_end|>");
  const at = start === undefined ? -1 : ids.lastIndexOf(start);
  if (at < 0) return { base: [...ids], partial: [] };
  for (let j = at + 1; j <= Math.min(ids.length, at + 4); j++) {
    if (folder.decode(ids.slice(at, j)) !== GENERATION_PROMPT) continue;
    const partial = ids.slice(j);
    if (partial.length === 0 || (end !== undefined && partial.includes(end))) break;
    return { base: ids.slice(0, j), partial };
  }
  return { base: [...ids], partial: [] };
}

/** Whether `all` (a completion planned from the prompt proper) begins with `partial`. */
export function continues(all: readonly number[], partial: readonly number[]): boolean {
  return partial.length > 0 && partial.length < all.length && partial.every((id, i) => all[i] === id);
}
