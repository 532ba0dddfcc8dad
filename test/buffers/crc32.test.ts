// The journal's checksum is CRC-32 (IEEE), whichever implementation computes it: entries
// written by one build must verify under another. Checked against the bitwise definition
// on odd lengths and offsets, and chained across pieces as the reader and writer do.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { randomBytes } from "node:crypto";
import { crc32, crc32Combine } from "../../buffers/crc32.ts";
import { encodeEntry, EntryKind } from "../../sessions/journal/journal-format.ts";

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
  for (const [start, end] of [
    [0, 1],
    [1, 64],
    [3, 4099],
    [7, 70_001],
    [0, 70_001],
  ] as const) {
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

test("crc32Combine: the CRC of a concatenation from its parts' CRCs, at any split", () => {
  const data = randomBytes(3 * 2 ** 20 + 17);
  const whole = crc32(data);
  for (const at of [0, 1, 2, 7, 8, 9, 255, 4096, 65537, 2 ** 20, data.length - 1, data.length]) {
    const a = data.subarray(0, at);
    const b = data.subarray(at);
    assert.is(crc32Combine(crc32(a), crc32(b), b.length), whole, `split at ${at}`);
  }
});

test("crc32Combine agrees with itself for lengths up to the 4 GiB entry limit (associativity)", () => {
  // crc(zeros(2n)) = combine(crc(zeros(n)), crc(zeros(n)), n): zero runs of any length without allocating them.
  const zeros: number[] = [crc32(Buffer.alloc(1))];
  for (let k = 1; k < 32; k++) zeros.push(crc32Combine(zeros[k - 1]!, zeros[k - 1]!, 2 ** (k - 1)));
  assert.is(zeros[20], crc32(Buffer.alloc(2 ** 20)), "doubling matches a real 1 MiB of zeros");
  const a = crc32(Buffer.from("head")),
    c = crc32(Buffer.from("tail"));
  const n = 2 ** 31;
  const left = crc32Combine(crc32Combine(a, zeros[31]!, n), c, 4);
  const right = crc32Combine(a, crc32Combine(zeros[31]!, c, 4), n + 4);
  assert.is(left, right);
});

test("an entry encoded with a reply's known CRC is the entry encoded from its bytes", () => {
  const reply = [randomBytes(1000), randomBytes(2 ** 20), Buffer.alloc(0), randomBytes(33)];
  const request = Buffer.from('{"input_ids":[1,2,3]}');
  const meta = {
    kind: EntryKind.TURN,
    id: "s",
    index: 0,
    timestamp: 1,
    method: "POST",
    path: "/v1/chat/completions",
    statusCode: 200,
    requestBytes: request.length,
    responseBytes: 2 ** 20 + 1033,
    completionIds: [5],
    assistant: { role: "assistant", content: "x" },
  } as const;
  const plain = encodeEntry(meta, [request, ...reply]);
  const known = encodeEntry(meta, [request, { parts: reply, crc: crc32(Buffer.concat(reply)) }]);
  assert.ok(Buffer.concat(known.parts).equals(Buffer.concat(plain.parts)));
  assert.is(known.bytes, plain.bytes);
  assert.is(known.payloadOffset, plain.payloadOffset);
});

test.run();
