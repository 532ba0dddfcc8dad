// Byte scans of a raw JSON request body for the pre-built mode, which never parses one:
// the number of assistant messages, and the prompt's token-id array (where it sits, how
// many ids, how many assistant turns it holds). Both are single passes over the bytes.
// They trust the body to be what the session server sends; a body built to fool them
// (a key spelled inside a string value) can miscount, which only changes a benchmark key.

const ROLE = Buffer.from('"role"');
const ASSISTANT = Buffer.from('"assistant"');

function isSpace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

/** Counts `"role"<ws>:<ws>"assistant"` in raw JSON bytes without parsing them. */
export function countAssistantTurns(body: Buffer): number {
  let count = 0;
  for (let at = body.indexOf(ASSISTANT); at >= 0; at = body.indexOf(ASSISTANT, at + ASSISTANT.length)) {
    let i = at - 1;
    while (isSpace(body[i])) i--;
    if (body[i] !== 0x3a /* : */) continue;
    i--;
    while (isSpace(body[i])) i--;
    const start = i - ROLE.length + 1;
    if (start >= 0 && body.compare(ROLE, 0, ROLE.length, start, i + 1) === 0) count++;
  }
  return count;
}

export interface IdArray {
  /** The array's bytes, `[` through `]`, a view of the body. */
  bytes: Buffer;
  /** Ids in the array. */
  count: number;
  /** Adjacent (`header[0]`, `header[1]`) pairs: Qwen's `<|im_start|>` `assistant`. */
  headers: number;
}

/**
 * The last `"key": [ints]` in the body (the session server appends the prompt ids last),
 * read digit by digit. `header` is the id pair that opens an assistant turn, when the
 * tokenizer has one. Undefined when the key is absent or its value is not an int array.
 */
export function scanIdArray(body: Buffer, key: string, header?: readonly [number, number]): IdArray | undefined {
  const quoted = Buffer.from(`"${key}"`);
  for (let at = body.lastIndexOf(quoted); at >= 0; at = at > 0 ? body.lastIndexOf(quoted, at - 1) : -1) {
    let i = at + quoted.length;
    while (isSpace(body[i])) i++;
    if (body[i] !== 0x3a /* : */) continue;
    i++;
    while (isSpace(body[i])) i++;
    if (body[i] !== 0x5b /* [ */) continue;
    const start = i;
    let count = 0;
    let headers = 0;
    let previous = -1;
    let value = -1;
    for (i++; i < body.length; i++) {
      const b = body[i];
      if (b >= 0x30 && b <= 0x39) {
        value = (value < 0 ? 0 : value * 10) + (b - 0x30);
        continue;
      }
      if (value >= 0) {
        count++;
        if (header && previous === header[0] && value === header[1]) headers++;
        previous = value;
        value = -1;
      }
      if (b === 0x5d /* ] */) return { bytes: body.subarray(start, i + 1), count, headers };
      if (b !== 0x2c /* , */ && !isSpace(b)) break; // not an int array
    }
  }
  return undefined;
}

/** Whether the body sets `"key": true` (the last occurrence decides, as with JSON.parse). */
export function flagSet(body: Buffer, key: string): boolean {
  const quoted = Buffer.from(`"${key}"`);
  const at = body.lastIndexOf(quoted);
  if (at < 0) return false;
  let i = at + quoted.length;
  while (isSpace(body[i])) i++;
  if (body[i] !== 0x3a) return false;
  i++;
  while (isSpace(body[i])) i++;
  return body.toString("latin1", i, i + 4) === "true";
}
