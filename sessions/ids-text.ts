// The prompt ids of a turn as decimal JSON text ("1,2,3"): every engine API sends the
// prompt as a JSON list of ids. Written into one scratch buffer from tables of the
// 4-digit groups 0000-9999 (one division per id below 10^8, the rest through String()),
// a few times faster than `ids.join(",")`. It keeps no text between turns: a per-session
// cache of the last checkpoint's text cost about 6 bytes per token held, as much as the
// messages' text, for a conversion that now takes a small part of a turn's CPU
// (docs/benchmark.md, "Memory per token held": `npm run bench:ids-text`).

// The digits of 0-9999 as little-endian 32-bit words of ASCII bytes: each id is one or two
// 4-byte stores (DataView, inlined by the JIT), not one load and store per digit; at 80k ids
// that halved the conversion (docs/benchmark-history.md, issue 47). A word is stored whole
// even when fewer of its bytes are the id's: the next id's bytes overwrite the rest.
/** n without leading zeros, and how many of its 4 bytes that is. */
const LEAD = new Uint32Array(10_000);
const LEAD_BYTES = new Uint8Array(10_000);
/** n as exactly 4 digits ("0042"). */
const GROUP = new Uint32Array(10_000);
for (let n = 0; n < 10_000; n++) {
  const lead = String(n);
  const group = lead.padStart(4, "0");
  for (let c = 0; c < 4; c++) {
    if (c < lead.length) LEAD[n]! |= lead.charCodeAt(c) << (8 * c);
    GROUP[n]! |= group.charCodeAt(c) << (8 * c);
  }
  LEAD_BYTES[n] = lead.length;
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
  const view = new DataView(out.buffer, out.byteOffset, out.length);
  let p = 0;
  for (let i = 0; i < ids.length; i++) {
    const v = ids[i]!;
    if (i > 0) out[p++] = 0x2c;
    // Below 10^8 (every vocabulary): one or two words, the first without leading zeros. Each
    // id and its comma take at most 9 of the 12 bytes allowed it, so a whole word always fits.
    if (v >= 0 && v < 10_000) {
      view.setUint32(p, LEAD[v]!, true);
      p += LEAD_BYTES[v]!;
    } else if (v >= 10_000 && v < 100_000_000) {
      const first = (v / 10_000) | 0;
      view.setUint32(p, LEAD[first]!, true);
      p += LEAD_BYTES[first]!;
      view.setUint32(p, GROUP[v - first * 10_000]!, true);
      p += 4;
    } else {
      const text = String(v);
      for (let c = 0; c < text.length; c++) out[p++] = text.charCodeAt(c);
    }
  }
  return [out, p];
}
