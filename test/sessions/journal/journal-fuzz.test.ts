// Fuzzing journal replay (fast-check): random damage to a real segment — bytes flipped,
// zeroed or overwritten anywhere, the file cut short, garbage appended. Replay must keep
// every whole entry before the first damaged byte, exactly as a clean copy of that prefix
// replays, and report the rest: either a torn tail, cut off with a warning, after which
// the store takes appends again, or JournalCorruptError naming the segment and the byte
// offset of the damaged entry. The run count is printed.
import { test } from "uvu";
import * as assert from "uvu/assert";
import fc from "fast-check";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "pino";
import { JournalCorruptError } from "../../../sessions/errors.ts";
import { JournalRecordStore } from "../../../sessions/journal/journal-store.ts";
import { scanSegment } from "../../../sessions/journal/journal-reader.ts";
import type { ReplayVisitor, TurnRecord } from "../../../sessions/journal/records.ts";

const RUNS = 300;
const root = mkdtempSync(join(tmpdir(), "tito-journal-fuzz-"));
const SEGMENT = "00000001.tj";
let original: Buffer;
/** Where each entry starts, then the file's end. */
let offsets: number[];
/** oracle[k]: the replay history of a clean copy of the first k entries. */
const oracle: string[][] = [];
let n = 0;
test.after(() => rmSync(root, { recursive: true, force: true }));

function recorder(): ReplayVisitor & { history: string[] } {
  const history: string[] = [];
  return {
    history,
    created: (id) => history.push(`create ${id}`),
    committed: (id, t) =>
      history.push(`turn ${id} ${t.index} ${t.request.toString()} ${t.completionIds.join(",")} ${t.assistant.content}`),
    truncated: (id, count) => history.push(`truncate ${id} ${count}`),
    forked: (id, parent, count) => history.push(`fork ${id} ${parent} ${count}`),
    deleted: (id) => history.push(`delete ${id}`),
  };
}

function record(seed: number, replyBytes: number): TurnRecord {
  const reply = Buffer.alloc(replyBytes);
  for (let i = 0; i < replyBytes; i++) reply[i] = 32 + ((i * 7 + seed) % 90);
  return {
    timestamp: 1_700_000_000 + seed,
    method: "POST",
    path: "/v1/chat/completions",
    statusCode: 200,
    request: Buffer.from(`{"input_ids":[${seed}]}`),
    response: [reply.subarray(0, 10), reply.subarray(10)],
  };
}
const turn = (index: number) => ({
  index,
  completionIds: [index, 7],
  assistant: { role: "assistant", content: `a${index}` },
});

/** Replays a segment holding `bytes` in a fresh directory; the warnings logged and the outcome. */
async function replay(bytes: Buffer) {
  const dir = join(root, `case-${n++}`);
  mkdirSync(dir);
  writeFileSync(join(dir, SEGMENT), bytes);
  const warnings: string[] = [];
  const logger = {
    warn: (_o: unknown, msg: string) => warnings.push(msg),
    error: () => {},
    info: () => {},
    debug: () => {},
  } as unknown as Logger;
  const store = await JournalRecordStore.open({ dir, fsync: "never", logger });
  const visitor = recorder();
  let error: unknown;
  try {
    await store.recover(visitor);
  } catch (err) {
    error = err;
  }
  return { dir, store, warnings, error, history: visitor.history };
}

test.before(async () => {
  // A segment in which one session ("keep") stays alive, so nothing is compacted away.
  const dir = join(root, "original");
  const store = await JournalRecordStore.open({ dir, fsync: "never" });
  await store.open("keep");
  for (const [i, id] of ["a", "b", "c"].entries()) {
    await store.open(id);
    await store.append(id, record(i * 10, 40 + i * 700), turn(0));
    await store.append("keep", record(i * 10 + 1, 1500), turn(i));
    await store.append(id, record(i * 10 + 2, 300), turn(1));
  }
  await store.truncate("a", 1);
  await store.append("a", record(99, 64), turn(1));
  await store.drop("b");
  await store.append("c", record(98, 2000), turn(2));
  await store.close();
  original = readFileSync(join(dir, SEGMENT));
  offsets = [];
  const fh = await open(join(dir, SEGMENT), "r");
  const end = (await scanSegment(join(dir, SEGMENT), fh, (e) => void offsets.push(e.offset))).end;
  await fh.close();
  offsets.push(end);
  assert.is(end, original.length);
  for (let k = 0; k < offsets.length; k++) {
    const clean = await replay(original.subarray(0, offsets[k]));
    assert.is(clean.error, undefined);
    oracle.push(clean.history);
    await clean.store.close();
  }
});

type Damage =
  | { kind: "flip"; at: number; xors: number[] }
  | { kind: "zero"; at: number; length: number }
  | { kind: "overwrite"; at: number; bytes: Uint8Array }
  | { kind: "cut"; at: number }
  | { kind: "append"; bytes: Uint8Array };

const damageArb: fc.Arbitrary<Damage> = fc.oneof(
  fc.record({
    kind: fc.constant("flip" as const),
    at: fc.nat(),
    xors: fc.array(fc.integer({ min: 1, max: 255 }), { minLength: 1, maxLength: 8 }),
  }),
  fc.record({ kind: fc.constant("zero" as const), at: fc.nat(), length: fc.integer({ min: 1, max: 4096 }) }),
  fc.record({
    kind: fc.constant("overwrite" as const),
    at: fc.nat(),
    bytes: fc.uint8Array({ minLength: 1, maxLength: 64 }),
  }),
  fc.record({ kind: fc.constant("cut" as const), at: fc.nat() }),
  fc.record({ kind: fc.constant("append" as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 64 }) }),
);

function damaged(d: Damage): Buffer {
  const out = Buffer.from(original);
  const at = d.kind === "append" ? 0 : d.at % original.length;
  switch (d.kind) {
    case "flip":
      d.xors.forEach((x, i) => at + i < out.length && (out[at + i] ^= x));
      return out;
    case "zero":
      out.fill(0, at, Math.min(out.length, at + d.length));
      return out;
    case "overwrite":
      Buffer.from(d.bytes).copy(out, at);
      return out;
    case "cut":
      return out.subarray(0, at);
    case "append":
      return Buffer.concat([out, Buffer.from(d.bytes)]);
  }
}

/** The first offset where `bytes` differs from the original (its length if it only lacks or adds bytes). */
function firstDamage(bytes: Buffer): number {
  const n = Math.min(bytes.length, original.length);
  for (let i = 0; i < n; i++) if (bytes[i] !== original[i]) return i;
  return n;
}

test(`replay keeps every whole entry before the damage and reports the rest (${RUNS} cases)`, async () => {
  const outcomes = { intact: 0, torn: 0, corrupt: 0 };
  await fc.assert(
    fc.asyncProperty(damageArb, async (d) => {
      const bytes = damaged(d);
      const at = firstDamage(bytes);
      // The damaged entry: the last one starting at or before the first changed byte.
      let k = 0;
      while (k + 1 < offsets.length && offsets[k + 1]! <= at) k++;
      const r = await replay(bytes);
      const path = join(r.dir, SEGMENT);
      try {
        assert.equal(r.history, oracle[k], `the entries before offset ${offsets[k]} replay as a clean copy does`);
        if (r.error !== undefined) {
          assert.instance(r.error, JournalCorruptError);
          assert.match((r.error as Error).message, `journal corrupt: ${path} at byte offset ${offsets[k]}: `);
          outcomes.corrupt++;
        } else if (bytes.length === offsets[k]) {
          assert.equal(r.warnings, [], "a file that ends at an entry boundary is whole");
          outcomes.intact++;
        } else {
          assert.is(r.warnings.length, 1, "a torn tail is reported");
          assert.match(r.warnings[0]!, /^journal: dropped a torn last entry/);
          // (Cut to nothing, the segment holds no session and compaction keeps it as a spare.)
          const size = statSync(path, { throwIfNoEntry: false })?.size ?? 0;
          assert.is(size, offsets[k], "and cut off: the segment ends at the last whole entry");
          await r.store.open("after"); // the store takes appends again
          outcomes.torn++;
        }
      } finally {
        await r.store.close();
        rmSync(r.dir, { recursive: true, force: true });
      }
    }),
    { numRuns: RUNS },
  );
  console.log(
    `journal fuzz: ${RUNS} damaged segments of ${offsets.length - 1} entries (${original.length} bytes): ` +
      `${outcomes.torn} torn tails cut, ${outcomes.corrupt} corrupt (offset named), ${outcomes.intact} cut at a boundary`,
  );
  assert.ok(outcomes.torn > 0 && outcomes.corrupt > 0, "both ways of reporting were exercised");
});

test.run();
