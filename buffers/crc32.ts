// CRC-32 (IEEE, as zlib), the journal's checksum, and the engine client's: it checksums a
// reply's bytes as they arrive (still in cache), and the journal combines that with the
// rest of the entry instead of reading the many-MiB reply again.
import zlib from "node:zlib";
import { createRequire } from "node:module";

export type Crc32 = (data: Uint8Array, value?: number) => number;

// zlib.crc32 arrived in Node 20.15; the table version keeps older 20.x working.
let table: Int32Array | undefined;
function tableCrc32(data: Uint8Array, value = 0): number {
  if (!table) {
    table = new Int32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      table[n] = c;
    }
  }
  let crc = ~value;
  for (let i = 0; i < data.length; i++) crc = table[(crc ^ data[i]!) & 0xff]! ^ (crc >>> 8);
  return ~crc >>> 0;
}

// Every journal byte is checksummed when written (and again by a replay), so the
// checksum's speed shows in the worker's CPU. @node-rs/crc32 (the same CRC-32, with
// PCLMULQDQ, faster than zlib's; docs/benchmark.md) when its prebuilt
// binary loads on this platform; zlib's otherwise.
function loadNativeCrc32(): Crc32 | undefined {
  try {
    const native = (createRequire(import.meta.url)("@node-rs/crc32") as { crc32: Crc32 }).crc32;
    return native(Buffer.from("123456789")) === 0xcbf43926 ? native : undefined;
  } catch {
    return undefined;
  }
}
export const crc32: Crc32 = loadNativeCrc32() ?? (zlib as unknown as { crc32?: Crc32 }).crc32 ?? tableCrc32;

// CRC-32 of a concatenation from the CRCs of its parts: crc(A || B) is crc(A) carried
// through |B| zero bytes, xor crc(B) (the initial and final inversions cancel). Carrying
// through n zero bytes is a multiplication by x^(8n) modulo the CRC polynomial, done
// with the powers x^(2^k) below, so it costs ~log2(n) products of 32 steps each.
const POLY = 0xedb88320; // x^32 + ... + 1, bit-reversed: bit 31 is x^0, bit 0 is x^31
const X0 = 0x80000000;

/** a * b modulo POLY, both bit-reversed polynomials. */
function mulModPoly(a: number, b: number): number {
  let product = 0;
  for (let bit = X0; a !== 0; bit >>>= 1) {
    if (a & bit) {
      product ^= b;
      a ^= bit;
    }
    b = b & 1 ? (b >>> 1) ^ POLY : b >>> 1; // b * x
  }
  return product >>> 0;
}

/** x^(2^k) modulo POLY, k = 0..34: enough for any length below 2^32 bytes (x^(8n), n = sum of 2^j). */
const X_POW_2K: number[] = [];
for (let k = 0, p = X0 >>> 1; k < 35; k++, p = mulModPoly(p, p)) X_POW_2K.push(p);

/** CRC-32 of A || B, given crc32(A), crc32(B) and B's length in bytes (below 2^32). */
export function crc32Combine(crcA: number, crcB: number, bytesB: number): number {
  let shift = X0; // x^(8 * bytesB), built bit by bit of the exponent
  for (let k = 3, n = bytesB; n > 0; n >>>= 1, k++) if (n & 1) shift = mulModPoly(X_POW_2K[k]!, shift);
  return (mulModPoly(shift, crcA) ^ crcB) >>> 0;
}
