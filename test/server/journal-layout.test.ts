// The journal's layout record across worker counts (server/host/journal-layout.ts), on a real
// data dir: which starts re-shard, and the record each leaves. The re-shard job itself
// (reshard-main.ts) is test/server/reshard.test.ts's; here it is the function the host
// passes, which records its job and writes the shards it is asked for.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { LAYOUT_FILE, prepareJournal, type ReshardJob } from "../../server/host/journal-layout.ts";

const dirs: string[] = [];
test.after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

function dataDir(shards: number[]): string {
  const dir = mkdtempSync(join(tmpdir(), "tito-layout-"));
  dirs.push(dir);
  for (const shard of shards) mkdirSync(join(dir, `shard-${shard}`));
  return dir;
}

/** Runs prepareJournal; the jobs it asked for, and the record it left. */
async function prepare(dir: string, workers: number) {
  const jobs: ReshardJob[] = [];
  const result = await prepareJournal(dir, workers, async (job) => {
    jobs.push(job);
    for (let shard = 0; shard < job.workers; shard++)
      mkdirSync(join(job.target, `shard-${shard}`), { recursive: true });
  });
  const record = JSON.parse(readFileSync(join(dir, LAYOUT_FILE), "utf8")) as unknown;
  return { jobs, result, record };
}

test("no record, only shard-0, one worker: nothing is moved, the record is written", async () => {
  const dir = dataDir([0]);
  const { jobs, result, record } = await prepare(dir, 1);
  assert.equal(jobs, []);
  assert.equal(result, {});
  assert.equal(record, { workers: 1 });
  assert.ok(existsSync(join(dir, "shard-0")));
});

test("no record, only shard-0, two workers: re-sharded from one", async () => {
  const { jobs, result, record } = await prepare(dataDir([0]), 2);
  assert.equal(
    jobs.map((j) => [j.from, j.workers]),
    [[1, 2]],
  );
  assert.equal(result, { reshardedFrom: 1 });
  assert.equal(record, { workers: 2 });
});

test("no record, two shards, two workers: re-sharded once, as documented", async () => {
  const dir = dataDir([0, 1]);
  const first = await prepare(dir, 2);
  assert.equal(
    first.jobs.map((j) => [j.from, j.workers]),
    [[2, 2]],
  );
  const again = await prepare(dir, 2);
  assert.equal(again.jobs, [], "with the record, the same count moves nothing");
  assert.equal(again.record, { workers: 2 });
});

test("an empty data dir: the record only", async () => {
  const { jobs, record } = await prepare(dataDir([]), 3);
  assert.equal(jobs, []);
  assert.equal(record, { workers: 3 });
});

test.run();
