// Which shard owns a session: FNV-1a 64 over the id's UTF-8 bytes, modulo the worker
// count. Fixed and unsalted, so every process (and every restart) agrees forever.
import { randomBytes } from "node:crypto";

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK = 0xffffffffffffffffn;

export function hash64(text: string): bigint {
  let h = FNV_OFFSET;
  for (const byte of Buffer.from(text, "utf8")) {
    h ^= BigInt(byte);
    h = (h * FNV_PRIME) & MASK;
  }
  return h;
}

export function shardOf(sessionId: string, workers: number): number {
  return Number(hash64(sessionId) % BigInt(workers));
}

/** A new session id: 32 lower-case hex characters. */
export function mintSessionId(): string {
  return randomBytes(16).toString("hex");
}
