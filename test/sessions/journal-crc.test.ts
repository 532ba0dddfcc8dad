// The journal's checksum is CRC-32 (IEEE), whichever implementation computes it: entries
// written by one build must verify under another. Checked against the bitwise definition
// on odd lengths and offsets, and chained across pieces as the reader and writer do.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { randomBytes } from "node:crypto";
import { crc32 } from "../../sessions/journal-format.ts";

function reference(data: Uint8Array, value = 0): number {
  let crc = ~value >>> 0;
  for (const byte of data) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1;
  }
  return ~crc >>> 0;
}

test("the check value of CRC-32/ISO-HDLC", () => {
  assert.is(crc32(Buffer.from("123456789")), 0xcbf43926);
  assert.is(crc32(Buffer.alloc(0)), 0);
});

test("equals the bitwise definition on odd lengths and offsets", () => {
  const data = randomBytes(70_001);
  for (const [start, end] of [[0, 1], [1, 64], [3, 4099], [7, 70_001], [0, 70_001]] as const) {
    const part = data.subarray(start, end);
    assert.is(crc32(part), reference(part), `bytes ${start}..${end}`);
  }
});

test("chains: the CRC of pieces in turn equals the CRC of the whole", () => {
  const data = randomBytes(1 << 20);
  let crc = 0;
  for (let off = 0; off < data.length; off += 65_537) crc = crc32(data.subarray(off, off + 65_537), crc);
  assert.is(crc, crc32(data));
  assert.is(crc, reference(data));
});

test.run();
