import { test } from "uvu";
import * as assert from "uvu/assert";
import { hash64, mintSessionId, shardOf } from "../../server/router/shard-hash.ts";

/** The textbook FNV-1a 64 with BigInt, to check the two-halves version against. */
function reference(text: string): bigint {
  let h = 0xcbf29ce484222325n;
  for (const byte of Buffer.from(text, "utf8")) h = ((h ^ BigInt(byte)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return h;
}

test("FNV-1a 64 known values and agreement with BigInt arithmetic", () => {
  assert.is(hash64(""), 0xcbf29ce484222325n);
  assert.is(hash64("a"), 0xaf63dc4c8601ec8cn);
  for (let i = 0; i < 2000; i++) {
    const id = i % 3 === 0 ? mintSessionId() : `sëssion-${i}-${"x".repeat(i % 50)}`;
    assert.is(hash64(id), reference(id), id);
    for (const n of [1, 2, 3, 7, 8, 256])
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
