// Synthetic routed_experts payloads and the response bytes that carry them.
// Owns one growing base64 buffer of a position-determined byte pattern: the base64 of
// any prefix whose length is a multiple of 3 is a prefix of it, so every payload size
// is a slice (no per-request allocation of tens of MiB) plus at most 4 fresh bytes.
// It never copies a payload into a bigger buffer: bodies are lists of chunks.
import { ROUTED_EXPERTS_MARKER } from "./sim-engine-reply.ts";

/** The synthetic payload byte at offset i (what routed_experts decodes to). */
export function payloadByte(i: number): number {
  return (i * 31 + (i >>> 8)) & 0xff;
}

function patternBytes(from: number, to: number): Buffer {
  const out = Buffer.allocUnsafe(to - from);
  for (let i = from; i < to; i++) out[i - from] = payloadByte(i);
  return out;
}

export class RoutedExpertsPayload {
  #bytes = 0; // raw bytes covered by #b64 (a multiple of 3)
  #b64: Buffer = Buffer.alloc(0);

  /** base64 of `size` pattern bytes, as chunks to write in order. */
  chunks(size: number): Buffer[] {
    const whole = size - (size % 3);
    if (whole > this.#bytes) this.#grow(whole);
    const out = [this.#b64.subarray(0, (whole / 3) * 4)];
    if (size > whole) out.push(Buffer.from(patternBytes(whole, size).toString("base64"), "latin1"));
    return out;
  }

  #grow(whole: number): void {
    // Grow geometrically so a slowly rising size (the benchmark's per-turn payload) re-encodes rarely.
    const target = Math.max(whole, Math.min(this.#bytes * 2, whole * 2));
    const bytes = target - (target % 3);
    this.#b64 = Buffer.from(patternBytes(0, bytes).toString("base64"), "latin1");
    this.#bytes = bytes;
  }
}

/** A JSON response as chunks, with the routed_experts marker (if any) replaced by the payload. */
export function responseChunks(body: unknown, payload: RoutedExpertsPayload, routedExpertsBytes: number): Buffer[] {
  const json = JSON.stringify(body);
  const at = json.indexOf(ROUTED_EXPERTS_MARKER);
  if (at < 0) return [Buffer.from(json, "utf8")];
  return [
    Buffer.from(json.slice(0, at), "utf8"),
    ...payload.chunks(routedExpertsBytes),
    Buffer.from(json.slice(at + ROUTED_EXPERTS_MARKER.length), "utf8"),
  ];
}
