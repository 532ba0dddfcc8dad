// What Python writes and how Python cuts strings, where JavaScript differs; the chat
// templates run on Python (jinja2 under transformers' apply_chat_template, which SGLang
// calls), so tito's renderer must write the same text (issue 39):
// - float repr: shortest round-trip digits (as JavaScript), but scientific notation when the
//   decimal point is at or before the 4th place after it or past the 16th digit, with a
//   signed exponent of at least two digits (`1e-07`, `1e+16`), and `.0` on whole floats;
// - str.strip/lstrip/rstrip/split: Python's whitespace (str.isspace) is not JavaScript's:
//   Python adds U+001C–U+001F and U+0085, JavaScript adds U+FEFF.

/** Python's `repr(float)` (and `str`, and json.dumps's text for a finite float). */
export function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const sign = x < 0 ? "-" : "";
  // toExponential() with no argument: the shortest digits that read back as x.
  const [mantissa, exponent] = Math.abs(x).toExponential().split("e") as [string, string];
  const digits = mantissa.replace(".", "");
  const exp = Number(exponent);
  const point = exp + 1;
  if (point <= -4 || point > 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const e = Math.abs(exp);
    return `${sign}${m}e${exp < 0 ? "-" : "+"}${e < 10 ? `0${e}` : e}`;
  }
  if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`;
  if (digits.length <= point) return `${sign}${digits}${"0".repeat(point - digits.length)}.0`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}

/** Python's `str.isspace` for one UTF-16 unit (every Python whitespace is in the BMP). */
export function isPySpace(code: number): boolean {
  if (code <= 0x20) return code === 0x20 || (code >= 0x09 && code <= 0x0d) || (code >= 0x1c && code <= 0x1f);
  if (code < 0x85) return false;
  return (
    code === 0x85 ||
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000
  );
}

type Strip = (s: string, chars?: string | null) => string;

/** The length (1 or 2 units) of the code point starting at `i` when it is to be stripped, else 0. */
function strippable(s: string, i: number, chars: ReadonlySet<number> | null): number {
  if (chars === null) return isPySpace(s.charCodeAt(i)) ? 1 : 0;
  const cp = s.codePointAt(i)!;
  return chars.has(cp) ? (cp > 0xffff ? 2 : 1) : 0;
}

/** The code point ending right before `end`: its start index. */
function pointStart(s: string, end: number): number {
  const low = s.charCodeAt(end - 1);
  if (end >= 2 && low >= 0xdc00 && low <= 0xdfff) {
    const high = s.charCodeAt(end - 2);
    if (high >= 0xd800 && high <= 0xdbff) return end - 2;
  }
  return end - 1;
}

const charSet = (chars: string | null | undefined) =>
  chars === null || chars === undefined ? null : new Set(Array.from(chars, (c) => c.codePointAt(0)!));

/** Python's `str.lstrip(chars)`: whitespace when chars is None, else any code point in chars. */
export const pyLstrip: Strip = (s, chars) => {
  const set = charSet(chars);
  let i = 0;
  for (let n; i < s.length && (n = strippable(s, i, set)) > 0;) i += n;
  return s.slice(i);
};

/** Python's `str.rstrip(chars)`. */
export const pyRstrip: Strip = (s, chars) => {
  const set = charSet(chars);
  let end = s.length;
  while (end > 0) {
    const start = pointStart(s, end);
    if (strippable(s, start, set) === 0) break;
    end = start;
  }
  return s.slice(0, end);
};

/** Python's `str.strip(chars)`. */
export const pyStrip: Strip = (s, chars) => pyRstrip(pyLstrip(s, chars), chars);

/** Python's `str.split(sep=None, maxsplit=-1)`; throws on an empty separator, as Python does. */
export function pySplit(s: string, sep: string | null = null, maxsplit = -1): string[] {
  if (sep !== null) {
    if (sep === "") throw new Error("empty separator");
    const parts = s.split(sep);
    if (maxsplit >= 0 && parts.length > maxsplit + 1) parts.push(parts.splice(maxsplit).join(sep));
    return parts;
  }
  const out: string[] = [];
  let i = 0;
  const n = s.length;
  for (;;) {
    while (i < n && isPySpace(s.charCodeAt(i))) i++;
    if (i >= n) break;
    if (maxsplit >= 0 && out.length >= maxsplit) {
      out.push(s.slice(i));
      break;
    }
    let j = i;
    while (j < n && !isPySpace(s.charCodeAt(j))) j++;
    out.push(s.slice(i, j));
    i = j;
  }
  return out;
}
