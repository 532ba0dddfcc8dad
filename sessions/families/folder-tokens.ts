// What several families ask of their tokenizer folder: that it has the tokens they write,
// and which of their in-turn tags it flags special (a drift segment that starts after such a
// tag is still the assistant's text).
import { SessionConfigError } from "../errors.ts";
import type { TokenizerFolder } from "../tokenizer-folder.ts";
import type { TitoFamily } from "./family.ts";

/** Throws SessionConfigError naming every one of `tokens` the folder lacks. */
export function requireTokens(folder: TokenizerFolder, family: string, tokens: readonly string[]): void {
  const missing = tokens.filter((t) => folder.tokenId(t) === undefined);
  if (missing.length > 0)
    throw new SessionConfigError(`tito family ${family} needs ${missing.join(", ")} in the tokenizer of ${folder.dir}`);
}

/** `into` with the ids of those `tokens` the folder has and flags special. */
export function flaggedSpecialIds(
  folder: TokenizerFolder,
  tokens: readonly string[],
  into: Set<number> = new Set(),
): Set<number> {
  for (const token of tokens) {
    const id = folder.tokenId(token);
    if (id !== undefined && folder.specialTokenIds.has(id)) into.add(id);
  }
  return into;
}

/** A family whose next message starts right where the model stopped: no boundary fix, no trim, nothing trailing. */
export const NO_BOUNDARY: Pick<TitoFamily, "maxTrimTokens" | "trailingTokenIds" | "boundaryIds"> = {
  maxTrimTokens: 0,
  trailingTokenIds: new Set(),
  boundaryIds: () => [],
};
