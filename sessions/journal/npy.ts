// vLLM's routed experts are a NumPy `.npy` file, base64-encoded (`np.save` of an integer
// array shaped tokens × layers × top-k, its dtype the smallest that holds the expert ids:
// uint8, uint16 or int32; vLLM PR #38939, vLLM 0.22.0, CompletionResponseChoice.routed_experts),
// where SGLang sends the raw little-endian int32 values. A sample has one shape whatever the
// engine: this turns an .npy payload into those int32 values. The format: the magic
// "\x93NUMPY", a version byte pair, the header length (2 bytes little-endian in version 1,
// 4 in versions 2 and 3), then a Python dict literal naming `descr`, `fortran_order` and
// `shape`, padded, then the data in C order.
import { SampleDataError } from "../errors.ts";

const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]); // \x93NUMPY

export const isNpy = (bytes: Buffer): boolean => bytes.length >= 10 && bytes.subarray(0, 6).equals(MAGIC);

const READERS: Record<string, { size: number; read: (b: Buffer, at: number) => number }> = {
  "|u1": { size: 1, read: (b, at) => b.readUInt8(at) },
  "|i1": { size: 1, read: (b, at) => b.readInt8(at) },
  "<u2": { size: 2, read: (b, at) => b.readUInt16LE(at) },
  "<i2": { size: 2, read: (b, at) => b.readInt16LE(at) },
  "<i4": { size: 4, read: (b, at) => b.readInt32LE(at) },
  "<u4": { size: 4, read: (b, at) => b.readUInt32LE(at) },
  "<i8": { size: 8, read: (b, at) => Number(b.readBigInt64LE(at)) },
};

/** An .npy integer array as little-endian int32 values in a buffer of its own (aligned). */
export function npyToInt32(bytes: Buffer, turn: number): Buffer {
  const fail = (why: string) =>
    new SampleDataError(`routed_experts of turn ${turn} is not a usable .npy array: ${why}`);
  const major = bytes[6]!;
  const headerLength = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = bytes.toString("latin1", start, start + headerLength);
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1];
  if (descr === undefined || shape === undefined) throw fail(`header ${JSON.stringify(header.trim())}`);
  if (/'fortran_order':\s*True/.test(header)) throw fail("fortran_order is True");
  const reader = READERS[descr];
  if (reader === undefined) throw fail(`dtype ${descr} is not an integer type it reads`);
  const count = shape
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .reduce((n, d) => n * Number(d), 1);
  const data = start + headerLength;
  if (!Number.isInteger(count) || bytes.length - data !== count * reader.size)
    throw fail(`shape (${shape}) of ${descr} needs ${count * reader.size} data bytes, it has ${bytes.length - data}`);
  const out = Buffer.from(new ArrayBuffer(count * 4));
  for (let i = 0; i < count; i++) out.writeInt32LE(reader.read(bytes, data + i * reader.size), i * 4);
  return out;
}
