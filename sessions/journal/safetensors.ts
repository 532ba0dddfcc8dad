// Writes the safetensors file format (huggingface/safetensors): an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte range, then
// the raw little-endian tensor bytes back to back. The tensor bytes go out as views of
// the caller's typed arrays, never copied into one buffer. It only writes; it never
// reads a file and knows nothing of sessions.
import assert from "node:assert";
import { endianness } from "node:os";

export type SafetensorsDtype = "I64" | "F32" | "I32" | "U8";

export interface Tensor {
  dtype: SafetensorsDtype;
  shape: number[];
  data: BigInt64Array | Float32Array | Int32Array | Uint8Array;
}

const BYTES: Record<SafetensorsDtype, number> = { I64: 8, F32: 4, I32: 4, U8: 1 };
// Typed arrays hold host-endian values; the format is little-endian.
assert.equal(endianness(), "LE", "safetensors writing assumes a little-endian host");

/**
 * The file as chunks, tensors in the given order. Put wider dtypes first and every
 * tensor starts 8-byte aligned (the header is padded to 8, as the reference writer does).
 * Metadata values must be strings (the format's rule).
 */
export function encodeSafetensors(tensors: Record<string, Tensor>, metadata: Record<string, string> = {}): Buffer[] {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  const data: Buffer[] = [];
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    assert.notEqual(name, "__metadata__", "a tensor cannot be named __metadata__");
    const count = t.shape.reduce((a, b) => a * b, 1);
    assert.equal(t.data.length, count, `tensor ${name}: ${t.data.length} values for shape [${t.shape}]`);
    assert.equal(t.data.BYTES_PER_ELEMENT, BYTES[t.dtype], `tensor ${name}: typed array does not match ${t.dtype}`);
    const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + bytes.length] };
    data.push(bytes);
    offset += bytes.length;
  }
  let json = JSON.stringify(header);
  const padded = Math.ceil((8 + Buffer.byteLength(json)) / 8) * 8 - 8;
  json += " ".repeat(padded - Buffer.byteLength(json));
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  return [prefix, Buffer.from(json, "utf8"), ...data.filter((b) => b.length > 0)];
}
