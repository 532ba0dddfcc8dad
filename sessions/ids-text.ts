// The prompt ids of a turn as decimal JSON text ("1,2,3"): every engine API sends the
// prompt as a JSON list of ids. Written digit by digit into one scratch buffer, a few
// times faster than `ids.join(",")`. It keeps no text between turns: a per-session cache
// of the last checkpoint's text cost about as many bytes per token held as the ids
// themselves (docs/benchmark.md, "Memory per token held"), for a conversion that takes a
// fraction of a turn's CPU (the request's JSON is parsed and its messages compared each
// turn anyway, both as long as the history).

/** Bytes of one id as text at most: "-2147483648" and its comma. */
const MAX_ID_BYTES = 12;
/** The scratch buffer is kept between calls up to this size (a 87k-id prompt); larger ones are one-off. */
const KEPT_SCRATCH_BYTES = 1 << 20;
let scratch = Buffer.allocUnsafe(64 * 1024);

/** `ids` as decimal text joined by commas: exactly `ids.join(",")` for integer ids. */
export function idsText(ids: readonly number[]): string {
  const need = ids.length * MAX_ID_BYTES;
  let out = scratch;
  if (need > out.length) {
    out = Buffer.allocUnsafe(need);
    if (need <= KEPT_SCRATCH_BYTES) scratch = out;
  }
  let p = 0;
  for (let i = 0; i < ids.length; i++) {
    let v = ids[i]!;
    if (i > 0) out[p++] = 0x2c;
    if (v < 0) {
      out[p++] = 0x2d;
      v = -v;
    }
    let digits = 1;
    for (let x = v; x >= 10; x = Math.floor(x / 10)) digits++;
    p += digits;
    for (let q = p - 1; q >= p - digits; q--) {
      const rest = Math.floor(v / 10);
      out[q] = 0x30 + v - rest * 10;
      v = rest;
    }
  }
  return out.toString("latin1", 0, p);
}
