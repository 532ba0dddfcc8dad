// Journals written before weight versions and idle expiry (test/fixtures/journal-before-
// weight-versions: written by the code at 7b2020d) still replay: the same sessions, the
// same records with `weight_version: null`, the deleted session still "not found", and
// they go on with new turns that keep their versions across a replay. An expired delete
// written now replays as "expired", never as a live session.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { JournalRecordStore, type SessionCore } from "../../../sessions/index.ts";
import { startSimEngine, type SimEngine } from "../../../server/sim-engine/sim-engine.ts";
import { chatRequest, coreFor, responseJson } from "../../helpers/core.ts";
import { qwen3 } from "../fixtures.ts";

const fixture = new URL("../../fixtures/journal-before-weight-versions/", import.meta.url);
const expected = JSON.parse(readFileSync(new URL("expected.json", fixture), "utf8")) as {
  bodies: Record<string, { records: Record<string, unknown>[]; metadata: unknown }>;
  histories: Record<string, unknown[]>;
};
const root = mkdtempSync(join(tmpdir(), "tito-journal-compat-"));
let engine: SimEngine;
const cores: SessionCore[] = [];

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: qwen3() });
});
test.after(async () => {
  for (const c of cores) await c.close();
  await engine?.close();
  rmSync(root, { recursive: true, force: true });
});

async function core(dir: string): Promise<SessionCore> {
  const recordStore = await JournalRecordStore.open({ dir, fsync: "every" });
  const c = coreFor({
    engineUrl: engine.url,
    tokenizerFolder: qwen3(),
    allowedAppendRoles: ["tool", "user"],
    recordStore,
  });
  cores.push(c);
  return c;
}

test("an old journal replays to the same sessions and records, each with weight_version null", async () => {
  const dir = join(root, "old");
  cpSync(new URL("journal/", fixture), dir, { recursive: true });
  const c = await core(dir);
  assert.equal(await c.recover(), { sessions: 2, turns: 4 });
  for (const id of ["kept", "rolled"]) {
    const body = await responseJson(await c.get(id));
    const old = expected.bodies[id]!;
    assert.equal(
      body.records,
      old.records.map((r) => ({ ...r, weight_version: null })),
      `${id}: the old records, byte for byte, plus the new field`,
    );
    // The ids are the journal's; the drift report is a fresh re-render with today's family
    // renderer (qwen3's own template since the fixture was written), so it is not compared.
    // engine_api is newer than the fixture: the API the core runs now.
    const { tito_session_mismatch: _now, engine_api: api, ...ids } = body.metadata;
    assert.is(api, "sglang-chat");
    const { tito_session_mismatch: _then, ...oldIds } = old.metadata as Record<string, unknown>;
    assert.equal(ids, oldIds);
  }
  const deleted = await c.get("deleted");
  assert.equal([deleted.status, (await responseJson(deleted)).error], [404, "session not found: session_id=deleted"]);
  const sample = await responseJson(await c.samples("kept", { ...chatRequest([]), body: Buffer.alloc(0) }));
  assert.equal(
    [sample.turns.map((t: { weight_version: unknown }) => t.weight_version), sample.oldest_weight_version],
    [[null, null], null],
  );
});

test("an old session goes on under a version, and the version survives a replay", async () => {
  const dir = join(root, "old");
  const messages = [...expected.histories.kept!, { role: "user", content: "And tomorrow?" }];
  const res = await cores[0]!.chat("kept", chatRequest(messages), undefined, { weightVersion: "v1" });
  assert.is(res.status, 200);
  const replayed = await core(dir);
  assert.equal(await replayed.recover(), { sessions: 2, turns: 5 });
  const records = (await responseJson(await replayed.get("kept"))).records;
  assert.equal(
    records.map((r: { weight_version: unknown }) => r.weight_version),
    [null, null, "v1"],
  );
});

test("an expired delete replays as expired: the session stays gone and says why", async () => {
  const dir = join(root, "expired");
  cpSync(new URL("journal/", fixture), dir, { recursive: true });
  const store = await JournalRecordStore.open({ dir, fsync: "every" });
  const none = () => {};
  await store.recover({ created: none, committed: none, truncated: none, deleted: none, forked: none });
  await store.drop("rolled", "expired");
  await store.close();
  const c = await core(dir);
  assert.equal(await c.recover(), { sessions: 1, turns: 2 });
  const gone = await c.get("rolled");
  assert.equal(
    [gone.status, (await responseJson(gone)).error],
    [404, "session expired: session_id=rolled (it was idle longer than --session-idle-ttl-s and was deleted)"],
  );
  assert.is((await c.create("rolled")).status, 200, "the id can be taken again");
});

test.run();
