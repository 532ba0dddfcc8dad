// Forks in the record stores (RecordStore.fork, issue 43): a fork holds its parent's first
// turns' records as the same bytes, and later appends, rollbacks and deletes of either
// side never show in the other; the journal writes one FORK entry and replays it; its
// compaction keeps the parent's segments while a fork lives, and frees them after.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { JournalRecordStore } from "../../../sessions/journal/journal-store.ts";
import {
  MemoryRecordStore,
  type RecordStore,
  type ReplayVisitor,
  type TurnRecord,
} from "../../../sessions/journal/records.ts";

const root = mkdtempSync(join(tmpdir(), "tito-journal-fork-test-"));
let dirs = 0;
test.after(() => rmSync(root, { recursive: true, force: true }));

function record(seed: number, replyBytes = 3000): TurnRecord {
  const reply = Buffer.alloc(replyBytes);
  for (let i = 0; i < replyBytes; i++) reply[i] = 32 + ((i * 7 + seed) % 90);
  return {
    timestamp: 1_700_000_000 + seed,
    method: "POST",
    path: "/v1/chat/completions",
    statusCode: 200,
    request: Buffer.from(`{"input_ids":[${seed}]}`),
    response: [reply.subarray(0, 100), reply.subarray(100)],
  };
}
const state = (index: number) => ({ index, completionIds: [index], assistant: { role: "assistant", content: "a" } });

async function bodyText(store: RecordStore, id: string): Promise<string> {
  const body = store.body(id, Buffer.from("["), Buffer.from("]"));
  const parts: Buffer[] = [];
  if (Array.isArray(body)) parts.push(...body);
  else for await (const chunk of body) parts.push(chunk);
  return Buffer.concat(parts).toString();
}

function recorder(): ReplayVisitor & { history: string[] } {
  const history: string[] = [];
  return {
    history,
    created: (id) => history.push(`create ${id}`),
    committed: (id, t) => history.push(`turn ${id} ${t.index} ${t.request.toString()}`),
    truncated: (id, n) => history.push(`truncate ${id} ${n}`),
    forked: (id, parent, n) => history.push(`fork ${id} ${parent} ${n}`),
    deleted: (id) => history.push(`delete ${id}`),
  };
}

const journal = (segmentBytes?: number) =>
  JournalRecordStore.open({ dir: join(root, `shard-${dirs++}`), fsync: "never", segmentBytes });

for (const [name, open] of [
  ["memory", async () => new MemoryRecordStore()],
  ["journal", () => journal()],
] as const)
  test(`${name}: a fork holds its parent's first records; later changes of either never show in the other`, async () => {
    const store: RecordStore = await open();
    await store.open("p");
    for (let k = 0; k < 3; k++) await store.append("p", record(k), state(k));
    const prefix = await bodyText(store, "p");
    await store.fork("p", "c", 2, "p");
    await store.fork("c", "g", 1, "p");
    const twoOfThree = prefix.slice(0, prefix.lastIndexOf(',{"timestamp"')) + "]";
    assert.is(await bodyText(store, "c"), twoOfThree);
    await store.append("c", record(10), state(2));
    await store.truncate("p", 1);
    await store.append("p", record(20), state(1));
    assert.is((await store.list("c")).length, 3);
    assert.is((await store.list("c"))[1]!.request.toString(), '{"input_ids":[1]}', "the parent's turn 1, kept");
    assert.is((await store.list("p"))[1]!.request.toString(), '{"input_ids":[20]}');
    await store.drop("p");
    assert.is((await store.list("c")).length, 3, "a deleted parent leaves the fork whole");
    assert.is((await store.list("g")).length, 1);
    await store.close();
  });

test("journal: a fork is one small entry, replayed; the parent's segments live as long as a fork needs them", async () => {
  const segmentBytes = 16 * 1024;
  const dir = join(root, "compaction");
  let store = await JournalRecordStore.open({ dir, fsync: "never", segmentBytes });
  await store.recover(recorder());
  await store.open("p");
  for (let k = 0; k < 4; k++) await store.append("p", record(k), state(k));
  const filler = async (tag: string, seed: number, bytes: number) => {
    await store.open(tag);
    for (let k = 0; k < 3; k++) await store.append(tag, record(seed, bytes), state(k));
    await store.drop(tag);
  };
  // The fork's entry goes to a later segment than the parent's records.
  for (let n = 0; n < 3; n++) await filler(`f${n}`, 50 + n, 3000);
  const pSegment = store.segmentPaths()[0]!;
  const before = store.segmentPaths().length;
  assert.ok(before > 1);
  await store.fork("p", "c", 3, "p");
  assert.is(store.segmentPaths().length, before, "the fork copied no record");
  const forkBody = await bodyText(store, "c");
  // Other sessions come and go, rotating segments; then the parent is deleted.
  for (let n = 0; n < 10; n++) await filler(`s${n}`, 100 + n, 2000);
  await store.drop("p");
  await store.idle();
  assert.ok(store.segmentPaths().includes(pSegment), "the parent's records' segment stays for the fork");
  await store.close();
  store = await JournalRecordStore.open({ dir, fsync: "never", segmentBytes });
  const visitor = recorder();
  await store.recover(visitor);
  assert.ok(visitor.history.includes("fork c p 3"), visitor.history.join("\n"));
  assert.is(await bodyText(store, "c"), forkBody, "the fork replays byte for byte after its parent went");
  const kept = store.segmentPaths().length;
  await store.drop("c");
  for (let n = 0; n < 3; n++) await filler(`t${n}`, 200 + n, 4000);
  await store.idle();
  assert.not.ok(store.segmentPaths().includes(pSegment), "and goes with it");
  assert.ok(
    store.segmentPaths().length < kept,
    `segments freed once the fork went: ${kept} → ${store.segmentPaths().length}`,
  );
  await store.close();
});

test.run();
