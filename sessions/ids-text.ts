// The prompt ids of a turn as decimal JSON text ("1,2,3"): every engine API sends the
// prompt as a JSON list of ids. Written into one scratch buffer from a table of the
// 4-digit groups 0000-9999 (one division per id below 10^8, the rest through String()),
// a few times faster than `ids.join(",")`. It keeps no text between turns: a per-session
// cache of the last checkpoint's text cost about 6 bytes per token held, as much as the
// messages' text, for a conversion that now takes a small part of a turn's CPU
// (docs/benchmark.md, "Memory per token held": `npm run bench:ids-text`).

/** "0000".."9999", 4 ASCII digits each. */
const GROUPS = new Uint8Array(40_000);
for (let n = 0; n < 10_000; n++) {
  GROUPS[4 * n] = 0x30 + Math.floor(n / 1000);
  GROUPS[4 * n + 1] = 0x30 + (Math.floor(n / 100) % 10);
  GROUPS[4 * n + 2] = 0x30 + (Math.floor(n / 10) % 10);
  GROUPS[4 * n + 3] = 0x30 + (n % 10);
}

/** Bytes of one id as text at most: "-2147483648" and its comma. */
const MAX_ID_BYTES = 12;
/** The scratch bytes are kept between calls up to this size (an 87k-id prompt); larger ones are one-off. */
const KEPT_SCRATCH_BYTES = 1 << 20;
// A plain Uint8Array, not a Buffer: element writes to it are what the loop below is made of.
let scratch = new Uint8Array(64 * 1024);

/** `ids` as decimal text joined by commas: exactly `ids.join(",")` for integer ids. */
export function idsText(ids: ArrayLike<number>): string {
  const [out, p] = writeIds(ids);
  return Buffer.from(out.buffer, out.byteOffset, p).toString("latin1");
}

/**
 * idsText's bytes (ASCII, so its UTF-8 too), in a Buffer of their own: what an engine
 * request carries. The string of idsText spliced into a template string cost two more
 * passes over ~6 bytes per id (the latin1 string, then its UTF-8 encode) on every turn,
 * growing with the history (docs/benchmark.md, "Long sessions"). Written straight into
 * the Buffer returned (a view of one sized for the longest text), not into the scratch
 * and copied out: at 80k ids that copy was ~480 KB per turn.
 */
export function idsBytes(ids: ArrayLike<number>): Buffer {
  const out = Buffer.allocUnsafe(ids.length * MAX_ID_BYTES);
  // Written through a plain Uint8Array over the same memory, as the scratch is (one element kind for the loop).
  return out.subarray(0, writeIds(ids, new Uint8Array(out.buffer, out.byteOffset, out.length))[1]);
}

/**
 * Writes `ids` as text into `into` (at least MAX_ID_BYTES per id), else into the scratch
 * bytes (or one-off bytes when too long); returns them and the length.
 */
function writeIds(ids: ArrayLike<number>, into?: Uint8Array): [Uint8Array, number] {
  const need = ids.length * MAX_ID_BYTES;
  let out: Uint8Array = into ?? scratch;
  if (need > out.length) {
    const fresh = new Uint8Array(need);
    if (need <= KEPT_SCRATCH_BYTES) scratch = fresh;
    out = fresh;
  }
  const g = GROUPS;
  let p = 0;
  for (let i = 0; i < ids.length; i++) {
    const v = ids[i]!;
    if (i > 0) out[p++] = 0x2c;
    // Below 10^8 (every vocabulary): up to two groups, the first without leading zeros.
    let first = v;
    if (v >= 10_000 && v < 100_000_000) first = (v / 10_000) | 0;
    else if (!(v >= 0 && v < 10_000)) {
      const text = String(v);
      for (let c = 0; c < text.length; c++) out[p++] = text.charCodeAt(c);
      continue;
    }
    const f = 4 * first;
    if (first >= 1000) out[p++] = g[f]!;
    if (first >= 100) out[p++] = g[f + 1]!;
    if (first >= 10) out[p++] = g[f + 2]!;
    out[p++] = g[f + 3]!;
    if (first !== v) {
      const l = 4 * (v - first * 10_000);
      out[p++] = g[l]!;
      out[p++] = g[l + 1]!;
      out[p++] = g[l + 2]!;
      out[p++] = g[l + 3]!;
    }
  }
  return [out, p];
}
