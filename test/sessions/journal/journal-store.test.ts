// The journal record store on real files: round trip through replay (records byte for
// byte, the visitor's history), torn tails dropped, corruption named by path and offset,
// compaction of deleted sessions' segments (and a delete that must outlive older entries),
// a failed write (ENOSPC from /dev/full) that corrupts nothing, and a records stream that
// outlives the removal of its segment.
import { test } from "uvu";
import * as assert from "uvu/assert";
import {
  appendFileSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WRITTEN, type Releasable } from "../../../buffers/release.ts";
import { JournalCorruptError, JournalWriteError } from "../../../sessions/errors.ts";
import { JournalRecordStore } from "../../../sessions/journal/journal-store.ts";
import { openRecordStream, pooledReadBuffers, RecordStream } from "../../../sessions/journal/record-stream.ts";
import {
  MemoryRecordStore,
  type RecordStore,
  type ReplayVisitor,
  type TurnRecord,
} from "../../../sessions/journal/records.ts";

const roots: string[] = [];
const stores: RecordStore[] = [];
test.after.each(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

function freshDir(): string {
  const root = mkdtempSync(join(tmpdir(), "tito-journal-test-"));
  roots.push(root);
  return join(root, "shard-0");
}

async function openStore(dir: string, segmentBytes?: number): Promise<JournalRecordStore> {
  const store = await JournalRecordStore.open({ dir, fsync: "never", segmentBytes });
  stores.push(store);
  return store;
}

async function reopen(store: JournalRecordStore, dir: string, segmentBytes?: number) {
  await store.close();
  stores.splice(stores.indexOf(store), 1);
  const again = await openStore(dir, segmentBytes);
  const visitor = recorder();
  await again.recover(visitor);
  return { store: again, history: visitor.history };
}

function recorder(): ReplayVisitor & { history: string[] } {
  const history: string[] = [];
  return {
    history,
    created: (id) => history.push(`create ${id}`),
    committed: (id, t) =>
      history.push(`turn ${id} ${t.index} ${t.request.toString()} ${t.completionIds.join(",")} ${t.assistant.content}`),
    truncated: (id, n) => history.push(`truncate ${id} ${n}`),
    forked: (id, parent, n) => history.push(`fork ${id} ${parent} ${n}`),
    deleted: (id) => history.push(`delete ${id}`),
  };
}

/** A record whose reply arrives as several chunks of a position-dependent pattern. */
function record(seed: number, replyBytes = 3000): TurnRecord {
  const reply = Buffer.alloc(replyBytes, 0);
  for (let i = 0; i < replyBytes; i++) reply[i] = 32 + ((i * 7 + seed) % 90);
  const chunks = [reply.subarray(0, 1000), reply.subarray(1000, 1001), reply.subarray(1001)];
  return {
    timestamp: 1_700_000_000.123 + seed,
    method: "POST",
    path: "/v1/chat/completions",
    statusCode: 200,
    request: Buffer.from(`{"input_ids":[${seed}]}`),
    response: chunks,
  };
}
const state = (index: number) => ({
  index,
  completionIds: [index, index + 1],
  assistant: { role: "assistant", content: `a${index}` },
});

async function bodyText(store: RecordStore, id: string): Promise<string> {
  const body = store.body(id, Buffer.from("["), Buffer.from("]"));
  const parts: Buffer[] = [];
  if (Array.isArray(body)) parts.push(...body);
  else for await (const chunk of body) parts.push(chunk);
  return Buffer.concat(parts).toString();
}

/** How many records the store holds for `id`, read back through the store's own list(). */
async function recordCount(store: RecordStore, id: string): Promise<number> {
  return (await store.list(id)).length;
}

/** The same operations on both stores. */
async function script(stores: RecordStore[]) {
  for (const s of stores) {
    await s.open("s1");
    await s.open("s2");
    await s.append("s1", record(1), state(0));
    await s.append("s2", record(2, 5000), state(0));
    await s.append("s1", record(3), state(1));
    await s.truncate("s1", 1); // a rollback
    await s.append("s1", record(4), state(1));
    await s.append("s2", record(5), state(1));
    await s.drop("s2");
  }
}

test("records and history come back byte for byte after replay", async () => {
  const dir = freshDir();
  const journal = await openStore(dir);
  const memory = new MemoryRecordStore();
  await script([journal, memory]);
  const expected = await bodyText(memory, "s1");
  assert.is(await bodyText(journal, "s1"), expected);
  assert.is(await recordCount(journal, "s1"), 2);

  const { store, history } = await reopen(journal, dir);
  assert.equal(history, [
    "create s1",
    "create s2",
    `turn s1 0 {"input_ids":[1]} 0,1 a0`,
    `turn s2 0 {"input_ids":[2]} 0,1 a0`,
    `turn s1 1 {"input_ids":[3]} 1,2 a1`,
    "truncate s1 1",
    `turn s1 1 {"input_ids":[4]} 1,2 a1`,
    `turn s2 1 {"input_ids":[5]} 1,2 a1`,
    "delete s2",
  ]);
  assert.is(await bodyText(store, "s1"), expected);
  const whole = (records: TurnRecord[]) =>
    records.map((r) => ({ ...r, response: Buffer.concat(r.response).toString() }));
  assert.equal(whole(await store.list("s1")), whole(await memory.list("s1")), "list() reads the records back whole");
  // Appending goes on after a replay, into a new segment.
  await store.append("s1", record(6), state(2));
  const third = await reopen(store, dir);
  assert.is(await recordCount(third.store, "s1"), 3);
});

test("a torn last entry (cut mid-entry, or zero-filled) is dropped, not fatal", async () => {
  const dir = freshDir();
  const store = await openStore(dir);
  await store.open("s");
  for (let i = 0; i < 3; i++) await store.append("s", record(i), state(i));
  const [segment] = store.segmentPaths();
  const whole = statSync(segment!).size;
  truncateSync(segment!, whole - 1234); // the last turn's entry, cut inside its reply
  const cut = await reopen(store, dir);
  assert.is(await recordCount(cut.store, "s"), 2);
  assert.is(statSync(segment!).size < whole - 1234, true, "the torn bytes are cut off the file");

  await cut.store.append("s", record(7), state(2));
  const [, second] = cut.store.segmentPaths();
  appendFileSync(second!, Buffer.alloc(4096)); // a crash after the size grew, before the data landed
  const zeros = await reopen(cut.store, dir);
  assert.is(await recordCount(zeros.store, "s"), 3);
  assert.is(zeros.history.at(-1), `turn s 2 {"input_ids":[7]} 2,3 a2`);
});

test("a corrupt entry in the middle is reported with its path and byte offset", async () => {
  const dir = freshDir();
  const store = await openStore(dir);
  await store.open("s");
  await store.append("s", record(1), state(0));
  await store.append("s", record(2), state(1));
  await store.close();
  stores.splice(stores.indexOf(store), 1);
  const [name] = readdirSync(dir);
  const path = join(dir, name!);
  const bytes = readFileSync(path);
  const createEnd = bytes.indexOf(Buffer.from("TJE1"), 4); // the second entry (the first turn) starts here
  bytes[createEnd + 600] ^= 0xff; // inside the first turn's reply; a whole entry follows it
  writeFileSync(path, bytes);
  const again = await openStore(dir);
  try {
    await again.recover(recorder());
    assert.unreachable("replay must refuse a corrupt journal");
  } catch (err) {
    assert.instance(err, JournalCorruptError);
    assert.is((err as Error).message, `journal corrupt: ${path} at byte offset ${createEnd}: body checksum mismatch`);
  }
});

test("compaction removes segments whose sessions are all deleted; the journal stays bounded", async () => {
  const dir = freshDir();
  const segmentBytes = 16 * 1024;
  let store = await openStore(dir, segmentBytes);
  await store.open("keeper");
  await store.append("keeper", record(0), state(0));
  let peak = 0;
  for (let n = 0; n < 40; n++) {
    const id = `s${n}`;
    await store.open(id);
    for (let k = 0; k < 3; k++) await store.append(id, record(n + k), state(k));
    await store.drop(id);
    peak = Math.max(peak, store.segmentPaths().length);
  }
  // 40 sessions x ~10 KiB went through; only the keeper's first segment and the recent ones stay.
  await store.idle();
  const names = (paths: string[]) => paths.map((p) => p.slice(dir.length + 1));
  const kept = readdirSync(dir);
  assert.equal(
    kept.sort(),
    [...names(store.segmentPaths()), ...names(store.sparePaths())].sort(),
    "removed segments are gone from disk or kept as spares",
  );
  assert.ok(store.segmentPaths().length <= 3, `segments kept: ${store.segmentPaths().length} (peak ${peak})`);
  assert.ok(store.sparePaths().length <= 8, `spares kept: ${store.sparePaths().length}`);
  const { store: again, history } = await reopen(store, dir, segmentBytes);
  store = again;
  assert.ok(history.includes("create keeper"));
  for (let n = 0; n < 40; n++)
    assert.not.ok(
      history.some((h) => h === `create s${n}` && !history.includes(`delete s${n}`)),
      `s${n} stays deleted`,
    );
  assert.is(await recordCount(store, "keeper"), 1);
});

test("removed segments become spares that later rotations reuse; replay never reads a spare", async () => {
  const dir = freshDir();
  const segmentBytes = 16 * 1024;
  const store = await JournalRecordStore.open({ dir, fsync: "never", segmentBytes, spareSegments: 2 });
  stores.push(store);
  const fill = async (id: string) => {
    await store.open(id);
    for (let k = 0; k < 10; k++) await store.append(id, record(k, 4000), state(k)); // ~42 KiB: three sealed segments
  };
  await fill("a");
  await store.open("b"); // the active segment now also holds b: a's sealed segments can go
  await store.drop("a");
  await store.idle();
  const spares = store.sparePaths();
  assert.is(spares.length, 2, `spares: ${spares} (three segments removed, at most two kept)`);
  for (const path of spares) {
    assert.match(path, /spare-\d+\.tjs$/);
    assert.ok(statSync(path).size > 0, "a spare keeps its bytes (and pages) until a rotation takes it");
  }
  // A replay now (as after a crash) reads segments only: a's entries in the spares stay deleted.
  const visitor = recorder();
  const peek = await JournalRecordStore.open({ dir, fsync: "never", segmentBytes, spareSegments: 2 });
  await peek.recover(visitor);
  assert.equal(peek.sparePaths().sort(), [...spares].sort(), "a reopened journal adopts its spares");
  await peek.close();
  assert.not.ok(
    visitor.history.some((h) => h.startsWith("turn a ")),
    visitor.history.join("\n"),
  );
  // New appends rotate into the spares: emptied first, then renamed to the next segment names.
  const before = readdirSync(dir).length;
  for (let k = 0; k < 6; k++) await store.append("b", record(10 + k, 4000), state(k));
  assert.is(store.sparePaths().length, 0, "both spares were taken");
  assert.is(readdirSync(dir).length, before, "rotations reused the spare files instead of adding files");
  for (const path of spares) assert.not.ok(readdirSync(dir).includes(path.slice(dir.length + 1)));
  const { store: again, history } = await reopen(store, dir, segmentBytes);
  assert.is(await recordCount(again, "b"), 6);
  assert.not.ok(
    history.some((h) => h.startsWith("turn a ") || h === "create a"),
    "no entry of a came back through a reused file",
  );
  assert.match(await bodyText(again, "b"), `"request":{"input_ids":[15]}`);
});

test("a delete outlives older entries of its session (moved forward, never dropped first)", async () => {
  const dir = freshDir();
  const segmentBytes = 8 * 1024;
  const store = await openStore(dir, segmentBytes);
  await store.open("a");
  await store.open("b"); // keeps segment 1 alive
  await store.append("a", record(1), state(0));
  await store.append("b", record(2), state(0));
  await store.open("c");
  await store.append("c", record(3), state(0)); // segment 2
  await store.append("c", record(4), state(1));
  await store.drop("a"); // a's delete lands next to c's entries
  await store.append("c", record(5), state(2)); // segment 3: segment 2 is sealed
  await store.drop("c"); // segment 2 now holds only dead c and a's delete, but a's create is in segment 1
  const { history } = await reopen(store, dir, segmentBytes);
  assert.ok(history.includes("delete a"), "a's delete was kept");
  const live = new Set<string>();
  for (const h of history) {
    const [op, id] = h.split(" ");
    if (op === "create") live.add(id!);
    if (op === "delete") live.delete(id!);
  }
  assert.equal([...live], ["b"]);
});

test("a failed write fails that change with the cause, and nothing else is touched", async () => {
  // Small entries are written synchronously, large ones (routing-replay replies) through the thread pool.
  for (const replyBytes of [3000, 400_000]) {
    const dir = freshDir();
    const store = await openStore(dir, 4096);
    await store.open("s");
    await store.append("s", record(1, replyBytes), state(0)); // fills the active segment
    const seq = Number(
      store
        .segmentPaths()
        .at(-1)!
        .match(/(\d{8})\.tj$/)![1],
    );
    const next = join(dir, `${String(seq + 1).padStart(8, "0")}.tj`);
    symlinkSync("/dev/full", next); // the next segment's writes fail with ENOSPC
    try {
      await store.append("s", record(2, replyBytes), state(1));
      assert.unreachable("the write must fail");
    } catch (err) {
      assert.instance(err, JournalWriteError);
      assert.match((err as Error).message, `journal write failed (${next}): `);
      assert.match((err as Error).message, /ENOSPC/);
    }
    assert.is(await recordCount(store, "s"), 1, "the failed turn is not recorded");
    await store.append("s", record(3, replyBytes), state(1)); // a fresh segment takes it
    await store.open("t");
    const { store: again } = await reopen(store, dir, 4096);
    assert.is(await recordCount(again, "s"), 2);
    assert.is(await recordCount(again, "t"), 0);
    assert.match(await bodyText(again, "s"), `"request":{"input_ids":[3]}`);
  }
});

test("records streams read into pooled buffers, reused once the consumer releases them", async () => {
  const dir = freshDir();
  const store = await openStore(dir);
  await store.open("s");
  await store.append("s", record(1, 3 * 1024 * 1024 + 5), state(0)); // four reads of up to 1 MiB
  const expected = await bodyText(store, "s"); // never releases: fresh buffers, nothing pooled from it
  const read = async () => {
    const copies: Buffer[] = [];
    for await (const chunk of store.body("s", Buffer.from("["), Buffer.from("]")) as AsyncIterable<Releasable>) {
      copies.push(Buffer.from(chunk)); // as a socket takes the bytes
      chunk[WRITTEN]?.();
      chunk[WRITTEN]?.(); // a second release is ignored
    }
    return Buffer.concat(copies).toString();
  };
  const before = pooledReadBuffers();
  assert.is(await read(), expected);
  const pooled = pooledReadBuffers();
  assert.ok(pooled > before, `released buffers return to the pool (${before} -> ${pooled})`);
  assert.is(await read(), expected, "a second stream reads into reused buffers, bytes intact");
  assert.is(pooledReadBuffers(), pooled, "the second stream took its buffers from the pool and gave them back");
});

test("a records stream keeps reading a segment that compaction removed meanwhile", async () => {
  const dir = freshDir();
  const store = await openStore(dir, 4096);
  await store.open("s");
  await store.append("s", record(1, 3 * 1024 * 1024), state(0)); // > one 1 MiB read
  const expected = await bodyText(store, "s");
  const holding = store.segmentPaths().at(-1)!; // the record's segment
  const stream = store.body("s", Buffer.from("["), Buffer.from("]")) as AsyncIterable<Buffer>;
  const it = stream[Symbol.asyncIterator]();
  const first = await it.next();
  await store.drop("s");
  await store.open("other"); // seals the segment: compaction removes it
  await store.idle();
  assert.not.ok(readdirSync(dir).includes(holding.slice(dir.length + 1)), "the record's segment was unlinked");
  const parts = [first.value as Buffer];
  for (let r = await it.next(); !r.done; r = await it.next()) parts.push(r.value);
  assert.is(Buffer.concat(parts).toString(), expected);
});

async function drain(stream: AsyncIterable<Buffer>): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of stream) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts).toString();
}

test("a stream's portable parts, opened elsewhere, read the same bytes, even from an unlinked segment", async () => {
  const dir = freshDir();
  const store = await openStore(dir, 4096);
  await store.open("s");
  await store.append("s", record(1, 2 * 1024 * 1024 + 3), state(0));
  await store.append("s", record(2, 5000), state(1));
  const expected = await bodyText(store, "s");
  const stream = store.body("s", Buffer.from("["), Buffer.from("]"));
  assert.instance(stream, RecordStream);
  const parts = (stream as RecordStream).portableParts()!;
  assert.ok(
    parts.some((p) => !Buffer.isBuffer(p) && p.path.startsWith(dir)),
    "file ranges are named by path",
  );
  assert.is(await drain(await openRecordStream(parts)), expected, "by path");
  // Compaction unlinks the segments while the stream keeps them pinned (open).
  await store.drop("s");
  await store.open("other");
  await store.idle();
  const paths = parts.flatMap((p) => (Buffer.isBuffer(p) ? [] : [p.path]));
  assert.ok(
    paths.every((p) => !readdirSync(dir).includes(p.slice(dir.length + 1))),
    "the segments were unlinked",
  );
  await openRecordStream(parts).then(
    () => assert.unreachable("an unlinked path cannot be opened"),
    (err: NodeJS.ErrnoException) => assert.is(err.code, "ENOENT"),
  );
  assert.is(await drain(await openRecordStream(parts, process.pid)), expected, "through /proc/<pid>/fd/<fd>");
  await (stream as RecordStream).return();
});

test("portable parts only before reading begins", async () => {
  const dir = freshDir();
  const store = await openStore(dir);
  await store.open("s");
  await store.append("s", record(1), state(0));
  const stream = store.body("s", Buffer.from("["), Buffer.from("]")) as RecordStream;
  await stream.next();
  assert.is(stream.portableParts(), undefined, "a stream already read from");
  await stream.return();
  const stopped = store.body("s", Buffer.from("["), Buffer.from("]")) as RecordStream;
  await stopped.return();
  assert.is(stopped.portableParts(), undefined, "a stopped stream (its segments unpinned)");
});

test.run();
