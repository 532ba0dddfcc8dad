// The first differing piece of two texts or two id lists, for the cross-check's failures.

const WINDOW = 40;

/** Where two texts first differ, with a little of each around it. */
export function firstDifference(expected: string, actual: string): string {
  let i = 0;
  while (i < expected.length && i < actual.length && expected[i] === actual[i]) i++;
  const from = Math.max(0, i - WINDOW);
  return (
    `at character ${i}: expected ${JSON.stringify(expected.slice(from, i + WINDOW))}, ` +
    `actual ${JSON.stringify(actual.slice(from, i + WINDOW))}`
  );
}

export interface IdsDifference {
  index: number;
  /** The expected ids from the first difference (a few), decoded. */
  expected: string;
  /** The actual ids from the first difference (a few), decoded. */
  actual: string;
  /** The expected text around the difference, decoded. */
  context: string;
}

const PIECE = 4;

/** Where two id lists first differ (undefined when equal), decoded with `decode`. */
export function idsDifference(
  expected: readonly number[],
  actual: readonly number[],
  decode: (ids: number[]) => string,
): IdsDifference | undefined {
  let i = 0;
  while (i < expected.length && i < actual.length && expected[i] === actual[i]) i++;
  if (i === expected.length && i === actual.length) return undefined;
  return {
    index: i,
    expected: decode(expected.slice(i, i + PIECE)),
    actual: decode(actual.slice(i, i + PIECE)),
    context: decode(expected.slice(Math.max(0, i - PIECE * 2), i + PIECE * 2)),
  };
}
