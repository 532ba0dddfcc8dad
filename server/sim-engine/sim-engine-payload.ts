// Synthetic routed_experts payloads, their size, and the response bytes that carry them.
// Shaped as SGLang's: int32 little-endian expert ids, one row of layers × top-k per token
// of prompt + completion but the last, so POST /samples decodes it with no GPU. Owns one
// growing base64 buffer of a position-determined byte pattern: the base64 of any prefix
// whose length is a multiple of 3 is a prefix of it, so every payload size is a slice (no
// per-request allocation of tens of MiB) plus at most 4 fresh bytes. It never copies a
// payload into a bigger buffer: bodies are lists of chunks.
import { ROUTED_EXPERTS_MARKER } from "./sim-engine-reply.ts";

/** The routing of the simulated MoE: layers and experts per token per layer. */
export interface RoutingShape {
  layers: number;
  topK: number;
}

/** Qwen3-30B-A3B's: 48 MoE layers, 8 of 128 experts per token. */
export const DEFAULT_ROUTING_SHAPE: RoutingShape = { layers: 48, topK: 8 };

/** Experts the synthetic ids are drawn from (every value is below it). */
export const SIM_EXPERTS = 128;

/**
 * The routed_experts size of one reply in bytes (before base64): `fixedBytes` when set (a
 * load test that wants a given size; it is not per token, so samples refuse it), else
 * (prompt + completion − 1) × layers × top-k int32 values.
 */
export function routedExpertsSize(
  shape: RoutingShape,
  promptTokens: number,
  completionTokens: number,
  fixedBytes?: number,
): number {
  if (fixedBytes !== undefined) return Math.max(0, Math.floor(fixedBytes));
  return Math.max(0, promptTokens + completionTokens - 1) * shape.layers * shape.topK * 4;
}

/** The synthetic payload byte at offset i: int32 little-endian expert ids below SIM_EXPERTS. */
export function payloadByte(i: number): number {
  if (i % 4 !== 0) return 0;
  const n = i >>> 2; // the value's index
  return (n * 31 + (n >>> 8)) % SIM_EXPERTS;
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
