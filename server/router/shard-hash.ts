// Which shard owns a session: FNV-1a 64 over the id's UTF-8 bytes, modulo the worker
// count. Fixed and unsalted, so every process (and every restart) agrees forever.
// Computed in two 32-bit halves: it runs on every routed request, and BigInt is slower.
import { randomBytes } from "node:crypto";

const TWO_32 = 4294967296;

/** FNV-1a 64 as [high 32 bits, low 32 bits]. */
function fnv1a64(text: string): [number, number] {
  let hi = 0xcbf29ce4;
  let lo = 0x84222325;
  const bytes = Buffer.from(text, "utf8");
  for (let i = 0; i < bytes.length; i++) {
    lo = (lo ^ bytes[i]) >>> 0;
    // (hi·2^32 + lo) · (2^40 + 0x1b3) mod 2^64
    const low = lo * 0x1b3;
    const carry = Math.floor(low / TWO_32);
    hi = (Math.imul(hi, 0x1b3) + (lo << 8) + carry) >>> 0;
    lo = low >>> 0;
  }
  return [hi, lo];
}

export function shardOf(sessionId: string, workers: number): number {
  const [hi, lo] = fnv1a64(sessionId);
  return ((hi % workers) * (TWO_32 % workers) + (lo % workers)) % workers;
}

/** A new session id: 32 lower-case hex characters. */
export function mintSessionId(): string {
  return randomBytes(16).toString("hex");
}
