import { test } from "uvu";
import * as assert from "uvu/assert";
import { shardOf } from "../../server/protocol/shard-protocol.ts";
import { mintSessionId } from "../../server/router/router-sessions.ts";

/** The textbook FNV-1a 64 with BigInt, to check the two-halves version against. */
function reference(text: string): bigint {
  let h = 0xcbf29ce484222325n;
  for (const byte of Buffer.from(text, "utf8")) h = ((h ^ BigInt(byte)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return h;
}

// shardOf is the hash seen through a modulus. Residues modulo pairwise coprime numbers
// whose product exceeds 2^64 pin a 64-bit value down exactly (Chinese remainder theorem),
// so checking these residues checks the whole hash, not just its low bits.
const PINNING = [65536, 65521, 65537, 65539, 7];

test("FNV-1a 64 known values and agreement with BigInt arithmetic", () => {
  assert.ok(PINNING.reduce((p, m) => p * BigInt(m), 1n) > 2n ** 64n, "the moduli pin down 64 bits");
  for (const [text, known] of [
    ["", 0xcbf29ce484222325n],
    ["a", 0xaf63dc4c8601ec8cn],
  ] as const) {
    for (const m of PINNING) assert.is(shardOf(text, m), Number(known % BigInt(m)), `${JSON.stringify(text)} mod ${m}`);
  }
  for (let i = 0; i < 2000; i++) {
    const id = i % 3 === 0 ? mintSessionId() : `sëssion-${i}-${"x".repeat(i % 50)}`;
    for (const n of [1, 2, 3, 7, 8, 256, ...PINNING])
      assert.is(shardOf(id, n), Number(reference(id) % BigInt(n)), `${id} mod ${n}`);
  }
});

test("minted ids are 32 lower-case hex and spread over shards", () => {
  const counts = [0, 0, 0, 0];
  for (let i = 0; i < 4000; i++) {
    const id = mintSessionId();
    assert.match(id, /^[0-9a-f]{32}$/);
    counts[shardOf(id, 4)]++;
  }
  for (const c of counts) assert.ok(c > 800 && c < 1200, `balanced: ${counts}`);
});

test.run();
