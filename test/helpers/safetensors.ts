// A safetensors reader for tests, written from the format's description (8-byte LE
// header length, JSON header, contiguous little-endian tensor bytes) and independent of
// sessions/safetensors.ts, so a writer bug cannot hide behind a matching reader bug.
import * as assert from "uvu/assert";

export interface ReadTensor {
  dtype: string;
  shape: number[];
  values: number[];
}

/** A tensor's entry in the JSON header. */
interface HeaderEntry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

export function readSafetensors(file: Buffer): {
  tensors: Record<string, ReadTensor>;
  metadata: Record<string, string>;
} {
  const headerLength = Number(file.readBigUInt64LE(0));
  assert.is((8 + headerLength) % 8, 0, "header padded to 8 bytes");
  const header = JSON.parse(file.subarray(8, 8 + headerLength).toString("utf8")) as Record<string, unknown>;
  const data = file.subarray(8 + headerLength);
  const metadata = (header.__metadata__ ?? {}) as Record<string, string>;
  for (const v of Object.values(metadata)) assert.type(v, "string", "metadata values are strings");
  const tensors: Record<string, ReadTensor> = {};
  const ranges: Array<[number, number]> = [];
  for (const [name, entry] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const t = entry as HeaderEntry;
    const [start, end] = t.data_offsets;
    ranges.push([start, end]);
    const size = { I64: 8, F32: 4, I32: 4, U8: 1 }[t.dtype];
    assert.ok(size, `known dtype ${t.dtype}`);
    const count = t.shape.reduce((a: number, b: number) => a * b, 1);
    assert.is(end - start, count * size!, `${name}: byte range matches shape`);
    const values: number[] = [];
    for (let i = 0; i < count; i++) {
      const at = start + i * size!;
      if (t.dtype === "I64") values.push(Number(data.readBigInt64LE(at)));
      else if (t.dtype === "F32") values.push(data.readFloatLE(at));
      else if (t.dtype === "I32") values.push(data.readInt32LE(at));
      else values.push(data.readUInt8(at));
    }
    tensors[name] = { dtype: t.dtype, shape: t.shape, values };
  }
  // The format forbids holes and overlaps: the ranges tile the data exactly.
  ranges.sort((a, b) => a[0] - b[0]);
  let at = 0;
  for (const [s, e] of ranges) {
    assert.is(s, at, "tensor ranges are contiguous");
    at = e;
  }
  assert.is(at, data.length, "tensors cover the whole data section");
  return { tensors, metadata };
}
