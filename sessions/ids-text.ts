// The prompt ids of a session as decimal JSON text ("1,2,3"), kept per session for its
// latest checkpoint: the next turn's prompt extends that checkpoint, so only the ids it adds
// are converted. Number-to-text of the whole prompt every turn grew with the trajectory,
// and every engine API sends the prompt as a JSON list of ids.

/**
 * The decimal text of a checkpoint's ids ("1,2,3"), kept for the latest checkpoint of each
 * session: the next turn's prompt extends it, so only the new ids are converted.
 */
const checkpointText = new WeakMap<readonly number[], string>();

/** `ids` as decimal text; `base` is a list `ids` starts with whose text may be known. */
export function idsText(ids: readonly number[], base?: readonly number[]): string {
  const known = base === undefined ? undefined : checkpointText.get(base);
  if (known === undefined || base!.length > ids.length) return ids.join(",");
  for (let i = 0; i < base!.length; i++) if (ids[i] !== base![i]) return ids.join(","); // a family's boundaryDrop left the base's last ids out
  if (ids.length === base!.length) return known;
  const rest = ids.slice(base!.length).join(",");
  return known === "" ? rest : `${known},${rest}`;
}

/** Remembers `checkpoint`'s text (`promptText` + its completion ids) in place of `previous`'s. */
export function rememberCheckpointText(
  checkpoint: readonly number[],
  promptText: string,
  completionIds: readonly number[],
  previous?: readonly number[],
): void {
  if (previous !== undefined) checkpointText.delete(previous);
  const completion = completionIds.join(",");
  checkpointText.set(
    checkpoint,
    promptText === "" ? completion : completion === "" ? promptText : `${promptText},${completion}`,
  );
}
