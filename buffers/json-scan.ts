// A non-allocating structural JSON scanner over a body (a Buffer or a chunk list): skips values, walks object
// members and array elements, and reports byte spans. Strings are skipped by jumping
// from quote to quote: through the receiver's index of quote offsets when it has one, or
// with Buffer#indexOf (native memchr speed), so a 64 MiB base64 string costs one call.
// It checks structure (brackets, commas, colons, literals, number characters) but not
// string contents (escapes, control characters): slices a caller needs as values are
// given to JSON.parse, which checks them fully. Whose bytes these are, and so which error
// bad ones are, is the caller's to say: the scanner reports what is wrong and where, and
// throws what the caller's `invalid` makes of that (an engine reply's is a 502).
import { ByteChunks } from "./byte-chunks.ts";

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const MAX_DEPTH = 512;
const noop = () => {};

export interface MemberSpan {
  keyStart: number; // the key's opening quote
  keyEnd: number; // just past the key's closing quote
  valueStart: number;
  valueEnd: number; // just past the value
}

/** Makes the error for bytes that are not valid JSON; `detail` says what and at which byte. */
export type InvalidJson = (detail: string, options?: { cause?: unknown }) => Error;

export interface JsonScannerOptions {
  /** The error to throw for bytes that are not valid JSON. */
  invalid: InvalidJson;
  /**
   * The offsets of every '"' in the body, ascending, if the receiver already found them
   * (the engine client does, while the bytes were in cache); strings are then skipped
   * without reading them again. Without it, Buffer#indexOf finds them.
   */
  quotes?: readonly number[];
}

export class JsonScanner {
  readonly buf: ByteChunks;
  readonly #quotes: readonly number[] | undefined;
  readonly #invalid: InvalidJson;

  constructor(body: Buffer | readonly Buffer[], options: JsonScannerOptions) {
    this.buf = new ByteChunks(Buffer.isBuffer(body) ? [body] : body);
    this.#quotes = options.quotes;
    this.#invalid = options.invalid;
  }

  /** The offset of the first '"' at or after `from`, or -1. */
  #nextQuote(from: number): number {
    const quotes = this.#quotes;
    if (quotes === undefined) return this.buf.indexOf(QUOTE, from);
    let lo = 0;
    let hi = quotes.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (quotes[mid]! < from) lo = mid + 1;
      else hi = mid;
    }
    return lo < quotes.length ? quotes[lo]! : -1;
  }

  fail(what: string, at: number): never {
    throw this.#invalid(`${what} at byte ${at}`);
  }

  ws(p: number): number {
    const b = this.buf;
    while (p < b.length) {
      const c = b.at(p)!;
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      p++;
    }
    return p;
  }

  /** `p` at an opening quote; returns the position just past the closing one. */
  skipString(p: number): number {
    const b = this.buf;
    let q = this.#nextQuote(p + 1);
    for (;;) {
      if (q === -1) this.fail("unterminated string", p);
      // A quote preceded by an odd run of backslashes is escaped.
      let k = q - 1;
      while (b.at(k) === BACKSLASH) k--;
      if ((q - 1 - k) % 2 === 0) return q + 1;
      q = this.#nextQuote(q + 1);
    }
  }

  skipValue(p: number, depth = 0): number {
    const b = this.buf;
    if (p >= b.length) this.fail("unexpected end", p);
    const c = b.at(p)!;
    if (c === QUOTE) return this.skipString(p);
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (depth >= MAX_DEPTH) this.fail("nesting too deep", p);
      return c === 0x7b ? this.members(p, noop, depth) : this.elements(p, noop, depth);
    }
    if (c === 0x74) return this.#literal(p, "true");
    if (c === 0x66) return this.#literal(p, "false");
    if (c === 0x6e) return this.#literal(p, "null");
    let q = p;
    while (q < b.length) {
      const d = b.at(q)!;
      // digits, + - . e E
      if ((d >= 0x30 && d <= 0x39) || d === 0x2d || d === 0x2b || d === 0x2e || d === 0x65 || d === 0x45) q++;
      else break;
    }
    if (q === p) this.fail(`unexpected character ${JSON.stringify(String.fromCharCode(c))}`, p);
    return q;
  }

  #literal(p: number, word: string): number {
    for (let i = 0; i < word.length; i++)
      if (this.buf.at(p + i) !== word.charCodeAt(i)) this.fail("invalid literal", p);
    return p + word.length;
  }

  /**
   * Walks the members of the object at `p` (its `{`), calling `visit` for each; `visit`
   * may return the value's end itself (it skipped the value), else the value is skipped.
   * Returns the position just past the closing `}`.
   */
  members(p: number, visit: (m: MemberSpan) => number | void, depth = 0): number {
    const b = this.buf;
    if (b.at(p) !== 0x7b) this.fail("expected an object", p);
    let q = this.ws(p + 1);
    if (b.at(q) === 0x7d) return q + 1;
    for (;;) {
      if (b.at(q) !== QUOTE) this.fail("expected a member name", q);
      const keyEnd = this.skipString(q);
      const colon = this.ws(keyEnd);
      if (b.at(colon) !== 0x3a) this.fail("expected ':'", colon);
      const valueStart = this.ws(colon + 1);
      const span: MemberSpan = { keyStart: q, keyEnd, valueStart, valueEnd: -1 };
      const ended = visit(span);
      span.valueEnd = typeof ended === "number" ? ended : this.skipValue(valueStart, depth + 1);
      q = this.ws(span.valueEnd);
      if (b.at(q) === 0x2c) {
        q = this.ws(q + 1);
        continue;
      }
      if (b.at(q) === 0x7d) return q + 1;
      this.fail("expected ',' or '}'", q);
    }
  }

  /** Walks the elements of the array at `p` (its `[`); `visit` works as for `members`. */
  elements(p: number, visit: (index: number, start: number) => number | void, depth = 0): number {
    const b = this.buf;
    if (b.at(p) !== 0x5b) this.fail("expected an array", p);
    let q = this.ws(p + 1);
    if (b.at(q) === 0x5d) return q + 1;
    for (let i = 0; ; i++) {
      const ended = visit(i, q);
      q = this.ws(typeof ended === "number" ? ended : this.skipValue(q, depth + 1));
      if (b.at(q) === 0x2c) {
        q = this.ws(q + 1);
        continue;
      }
      if (b.at(q) === 0x5d) return q + 1;
      this.fail("expected ',' or ']'", q);
    }
  }

  /** Whether the member's key is `name` (escaped keys are decoded, as JSON.parse would). */
  keyIs(m: MemberSpan, name: string): boolean {
    const b = this.buf;
    const len = m.keyEnd - m.keyStart - 2;
    for (let i = m.keyStart + 1; i < m.keyEnd - 1; i++) {
      if (b.at(i) === BACKSLASH) return this.parse(m.keyStart, m.keyEnd) === name;
    }
    if (len !== name.length) return false;
    for (let i = 0; i < len; i++) if (b.at(m.keyStart + 1 + i) !== name.charCodeAt(i)) return false;
    return true;
  }

  /** JSON.parse of one slice; a bad slice is a bad reply. */
  parse(start: number, end: number): unknown {
    try {
      return JSON.parse(this.buf.toString(start, end));
    } catch (err) {
      throw this.#invalid(`${(err as Error).message} in bytes ${start}..${end}`, { cause: err });
    }
  }
}
