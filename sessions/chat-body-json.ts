// A chat request body read into values as parseJsonLossless reads it (lossless-json.ts),
// without making the whole body one string. Every turn re-sends the whole history, so the
// body grows with it: as one string of ~500 KB at 80k tokens it was a V8 large-object
// allocation per turn, and lossless-json's reader (in JS) went over all of it whenever any
// of it looked like a float or a long integer (`1.5` in a tool's output is enough). Here
// the bytes are scanned for the top-level `messages` list (buffers/json-scan.ts: quote to
// quote with native indexOf), each message is parsed from a string of its own with
// JSON.parse, and only a message that holds a number or an integer-like key (what JSON.parse
// can lose: lossless-json.ts) is read again by the lossless reader. The rest of the body
// (model, tools, sampling fields: it does not grow) is read by parseJsonLossless with an
// empty list in the messages' place. Anything else (no top-level object, no or two
// `messages` lists, a message that is not an object, bad JSON anywhere) is parsed whole,
// as before, so its value or its error is the one parseJsonLossless gives.
import { JsonScanner } from "../buffers/json-scan.ts";
import { parseJsonLossless } from "./lossless-json.ts";

/** parseJsonLossless(bytes.toString("utf8")), the messages of a chat body read one by one. */
export function parseChatJson(bytes: Buffer): unknown {
  const split = splitMessages(bytes);
  if (split !== undefined) {
    try {
      const { open, close, spans } = split;
      const body = parseJsonLossless(bytes.toString("utf8", 0, open + 1) + bytes.toString("utf8", close));
      const messages = (body as Record<string, unknown>).messages as unknown[];
      for (const [start, end] of spans) messages.push(parseMessage(bytes.toString("utf8", start, end)));
      return body;
    } catch {
      // Bad JSON somewhere: the whole body's parse says where, as it always did.
    }
  }
  return parseJsonLossless(bytes.toString("utf8"));
}

/** Where the top-level `messages` list's `[` and `]` are, and each message's bytes; undefined: parse whole. */
function splitMessages(bytes: Buffer): { open: number; close: number; spans: [number, number][] } | undefined {
  const fail = () => new SyntaxError("not split");
  const scanner = new JsonScanner(bytes, { invalid: fail });
  let found: { open: number; close: number; spans: [number, number][] } | undefined;
  let lists = 0;
  try {
    const start = scanner.ws(0);
    const end = scanner.members(start, (m) => {
      if (!scanner.keyIs(m, "messages")) return;
      lists++;
      if (bytes[m.valueStart] !== 0x5b) return;
      const spans: [number, number][] = [];
      const close = scanner.elements(
        m.valueStart,
        (_, at) => {
          if (bytes[at] !== 0x7b) throw fail();
          const after = scanner.skipValue(at, 2);
          spans.push([at, after]);
          return after;
        },
        1,
      );
      found = { open: m.valueStart, close: close - 1, spans };
      return close;
    });
    if (scanner.ws(end) !== bytes.length) return undefined;
  } catch {
    return undefined;
  }
  return lists === 1 ? found : undefined;
}

/** One message: JSON.parse, unless it holds what JSON.parse can lose (then the lossless reader). */
function parseMessage(text: string): unknown {
  const value = JSON.parse(text) as unknown;
  return lossSensitive(value) ? parseJsonLossless(text) : value;
}

/** An array index as a key: JavaScript lists such keys first, whatever order they were written in. */
const INDEX_KEY = /^(?:0|[1-9]\d{0,9})$/;

/** Whether a value holds a number or an integer-like key anywhere: what lossless-json.ts keeps beside JSON.parse. */
function lossSensitive(value: unknown): boolean {
  if (typeof value === "number") return true;
  if (value === null || typeof value !== "object") return false;
  if (Array.isArray(value)) return value.some(lossSensitive);
  for (const key in value) {
    if (INDEX_KEY.test(key) || lossSensitive((value as Record<string, unknown>)[key])) return true;
  }
  return false;
}
