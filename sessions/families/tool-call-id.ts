// Fresh tool-call ids for the replies the server builds itself: "call_" and 24 characters
// from [A-Za-z0-9], drawn from the crypto RNG so ids never repeat across sessions or workers.
import { randomBytes } from "node:crypto";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const ID_CHARS = 24;
// 248 = 4 * 62: bytes at or above it are redrawn, so every character is equally likely.
const UNBIASED_LIMIT = 248;

export function newToolCallId(): string {
  let id = "call_";
  while (id.length < 5 + ID_CHARS) {
    for (const byte of randomBytes(ID_CHARS)) {
      if (byte >= UNBIASED_LIMIT) continue;
      id += ALPHABET[byte % ALPHABET.length];
      if (id.length === 5 + ID_CHARS) break;
    }
  }
  return id;
}
