// Reads a request body's JSON into plain values (what JSON.parse gives), and remembers what
// JSON.parse loses that Python's json.loads keeps, for the chat-template renderer: a number's
// lexeme where it is a float (`30.0`, `1e-07`) or an integer past 2^53
// (`12345678901234567890`), and an object's key order where JavaScript reorders it
// (integer-like keys first: `{"z": 1, "10": 2}`). The engine renders tool schemas and
// tool-call arguments from the JSON as Python read it, so the template must see them that
// way too (issue 39). The side tables are keyed by the objects themselves (WeakMaps): the
// rest of the server keeps working with plain values, and a copy simply renders as JSON.parse
// would have read it. No library fits: lossless-json and json-bigint keep number text but
// build plain objects, whose integer-like keys JavaScript still moves to the front.

/** Per container (object or array): member key/index -> the number's JSON lexeme. */
const numberTexts = new WeakMap<object, Map<string | number, string>>();
/** Per object whose Object.keys order differs from the source: the source's key order. */
const keyOrders = new WeakMap<object, readonly string[]>();

/** The JSON lexeme of `container[key]` when that number was read from text and JSON.parse loses something of it. */
export function sourceNumber(container: object, key: string | number): string | undefined {
  return numberTexts.get(container)?.get(key);
}

/** The key order of `obj` as it was written, when it differs from Object.keys(obj). */
export function sourceKeyOrder(obj: object): readonly string[] | undefined {
  return keyOrders.get(obj);
}

/**
 * Whether the text can hold anything JSON.parse loses: a digit before `.`/`e`/`E` (a float
 * lexeme), 16+ digits in a row (an integer past 2^53), or a key of digits. A superset: a
 * false positive only costs the slower reader.
 */
const MAYBE_LOSSY = /\d[.eE]|\d{16}|"\d+"\s*:/;

/** JSON.parse, plus the side tables above; a syntax error is JSON.parse's own. */
export function parseJsonLossless(text: string): unknown {
  if (!MAYBE_LOSSY.test(text)) return JSON.parse(text);
  let value: unknown;
  try {
    const reader = new Reader(text);
    value = reader.value();
    reader.space();
    if (!reader.done()) throw new SyntaxError("trailing text");
  } catch {
    // Invalid JSON: JSON.parse throws the error message clients know.
    return JSON.parse(text);
  }
  return value;
}

const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?/y;
/** Characters a JSON string holds as they are: anything but a quote, a backslash or a control character (below space). */
const PLAIN = /[ !#-[\]-\uffff]*/y;
const SAFE_DIGITS = 15;

class Reader {
  #at = 0;
  readonly #text: string;
  constructor(text: string) {
    this.#text = text;
  }
  done(): boolean {
    return this.#at === this.#text.length;
  }
  space(): void {
    const t = this.#text;
    let i = this.#at;
    for (;;) {
      const c = t.charCodeAt(i);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else break;
    }
    this.#at = i;
  }
  #fail(): never {
    throw new SyntaxError(`bad JSON at ${this.#at}`);
  }
  /** A value; `into`/`key`: where it goes, so a lossy number's lexeme can be remembered. */
  value(into?: object, key?: string | number): unknown {
    this.space();
    const c = this.#text.charCodeAt(this.#at);
    if (c === 0x22) return this.#string();
    if (c === 0x7b) return this.#object();
    if (c === 0x5b) return this.#array();
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.#number(into, key);
    for (const [word, v] of LITERALS)
      if (this.#text.startsWith(word, this.#at)) {
        this.#at += word.length;
        return v;
      }
    this.#fail();
  }
  #number(into: object | undefined, key: string | number | undefined): number {
    NUMBER.lastIndex = this.#at;
    const m = NUMBER.exec(this.#text);
    if (!m) this.#fail();
    this.#at += m[0].length;
    const lexeme = m[0];
    const lossy = m[1] !== undefined || m[2] !== undefined || lexeme.replace("-", "").length > SAFE_DIGITS;
    if (lossy && into !== undefined && key !== undefined) {
      let texts = numberTexts.get(into);
      if (!texts) numberTexts.set(into, (texts = new Map()));
      texts.set(key, lexeme);
    }
    return Number(lexeme);
  }
  #string(): string {
    const t = this.#text;
    const start = this.#at + 1;
    let i = start;
    let escaped = false;
    for (;;) {
      // The run of plain characters in one native regex step: strings are most of a chat
      // body (the whole history), and a loop here in JS was the reader's main cost.
      PLAIN.lastIndex = i;
      PLAIN.test(t);
      i = PLAIN.lastIndex;
      const c = t.charCodeAt(i);
      if (c === 0x22) break;
      if (c === 0x5c) {
        escaped = true;
        i += 2;
      } else this.#fail(); // a raw control character, or the text ended inside the string
    }
    this.#at = i + 1;
    // A long substring is a view of the whole text in V8 (a sliced string, from 13 characters
    // on), and the session keeps the messages it read: each turn's appended message kept
    // that turn's whole request body alive. JSON.parse of the string's own text makes a
    // string of its own (and reads the escapes).
    return escaped || i - start > 12 ? (JSON.parse(t.slice(start - 1, i + 1)) as string) : t.slice(start, i);
  }
  #eat(code: number): boolean {
    this.space();
    if (this.#text.charCodeAt(this.#at) !== code) return false;
    this.#at++;
    return true;
  }
  #array(): unknown[] {
    this.#at++;
    const out: unknown[] = [];
    if (this.#eat(0x5d)) return out;
    do out.push(this.value(out, out.length));
    while (this.#eat(0x2c));
    if (!this.#eat(0x5d)) this.#fail();
    return out;
  }
  #object(): Record<string, unknown> {
    this.#at++;
    const out: Record<string, unknown> = {};
    const order: string[] = [];
    if (!this.#eat(0x7d)) {
      do {
        this.space();
        if (this.#text.charCodeAt(this.#at) !== 0x22) this.#fail();
        const key = this.#string();
        if (!this.#eat(0x3a)) this.#fail();
        if (!Object.hasOwn(out, key)) order.push(key);
        else numberTexts.get(out)?.delete(key);
        // defineProperty: a "__proto__" key is an own property, as JSON.parse makes it.
        Object.defineProperty(out, key, {
          value: this.value(out, key),
          writable: true,
          enumerable: true,
          configurable: true,
        });
      } while (this.#eat(0x2c));
      if (!this.#eat(0x7d)) this.#fail();
    }
    const keys = Object.keys(out);
    if (keys.some((k, i) => k !== order[i])) keyOrders.set(out, order);
    return out;
  }
}

const LITERALS: ReadonlyArray<[string, unknown]> = [
  ["true", true],
  ["false", false],
  ["null", null],
];

/**
 * JSON.stringify's compact text of a value read by parseJsonLossless, with its numbers
 * written as they were read and its objects' keys in the order they were written.
 */
export function stringifyLossless(value: unknown): string {
  return write(value, undefined, undefined) ?? "null";
}

function write(value: unknown, container: object | undefined, key: string | number | undefined): string | undefined {
  if (typeof value === "number") {
    const lexeme = container === undefined || key === undefined ? undefined : sourceNumber(container, key);
    return lexeme ?? JSON.stringify(value);
  }
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map((v, i) => write(v, value, i) ?? "null").join(",")}]`;
  const obj = value as Record<string, unknown>;
  const parts: string[] = [];
  for (const k of sourceKeyOrder(obj) ?? Object.keys(obj)) {
    const text = write(obj[k], obj, k);
    if (text !== undefined) parts.push(`${JSON.stringify(k)}:${text}`);
  }
  return `{${parts.join(",")}}`;
}
