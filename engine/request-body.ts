// The body sent to the engine for one turn: the client's request with the fields TITO
// forces (logprobs, meta info, replay flags) and the prompt's `input_ids` added. When the
// client's JSON has none of those keys, the new fields are spliced onto its bytes instead
// of re-serializing the whole request: a turn's request carries the whole conversation,
// so a JSON.stringify (and its UTF-8 encode) per turn grew with the history. The result
// parses to the same object as the re-serialized one (same keys, same order, same values;
// the client's own number and string spellings are kept as sent). The body is the list of
// its parts, never joined: the client's bytes and the prompt's ids go to the engine's
// socket and the journal as they are (a writev each), where one Buffer of them was a
// copy of the whole history per turn (~1 MB at 80k tokens, docs/benchmark-history.md).

/** ASCII whitespace JSON allows around values. */
const isJsonSpace = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
const CLOSE_BRACE = 0x7d;
const IDS_END = Buffer.from("]}");

/**
 * `body` is `JSON.parse(bytes)` (a non-empty object); `forced` are the fields to set, in
 * order, with `input_ids` last; `promptBytes` is `promptIds` as idsBytes writes them. Never
 * mutates its inputs.
 */
export function buildUpstreamBody(
  bytes: Buffer,
  body: Record<string, unknown>,
  forced: Record<string, unknown>,
  promptIds: ArrayLike<number>,
  promptBytes: Buffer = Buffer.from(Array.from(promptIds).join(","), "latin1"),
): Buffer[] {
  let end = bytes.length - 1;
  while (end >= 0 && isJsonSpace(bytes[end]!)) end--;
  const spliceable =
    end > 0 &&
    bytes[end] === CLOSE_BRACE &&
    Object.keys(body).length > 0 &&
    !("input_ids" in body) &&
    Object.keys(forced).every((key) => !Object.hasOwn(body, key));
  if (!spliceable) return [Buffer.from(JSON.stringify({ ...body, ...forced, input_ids: Array.from(promptIds) }))];
  const extra = JSON.stringify(forced).slice(1, -1);
  const head = Buffer.from(`${extra ? `,${extra}` : ""},"input_ids":[`, "utf8");
  return [bytes.subarray(0, end), head, promptBytes, IDS_END];
}
