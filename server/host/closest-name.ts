// The known name nearest to a misspelt one, for "did you mean" in option errors: the
// Levenshtein distance of the lower-cased names (a case slip like `engineURL` costs
// nothing), ties broken by the distance with case. Small and exact; names are short.

/** Edits (insert, delete, substitute one character) that turn `a` into `b`. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitute = previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      row.push(Math.min(previous[j]! + 1, row[j - 1]! + 1, substitute));
    }
    previous = row;
  }
  return previous[b.length]!;
}

/** The entry of `known` closest to `name` (the first of equals). `known` must not be empty. */
export function closestName(name: string, known: readonly string[]): string {
  const score = (k: string) => editDistance(name.toLowerCase(), k.toLowerCase()) * 1000 + editDistance(name, k);
  let best = known[0]!;
  for (const k of known) if (score(k) < score(best)) best = k;
  return best;
}
