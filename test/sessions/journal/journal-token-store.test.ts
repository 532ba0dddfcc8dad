// A journal written before the token store (test/fixtures/journal-before-token-store: written
// by the code at b8389e8, when every checkpoint was its own copy of the ids) replays into
// today's sessions unchanged: the same records, token ids and samples for a tool loop under
// two weight versions, a session with a one-turn rollback, a retried first turn (a rollback
// to the empty session) and a plain chat; the deleted session stays gone. The replayed
// sessions then go on (a new turn, a rollback) and replay again to the same state.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { JournalRecordStore, type SessionCore } from "../../../sessions/index.ts";
import { startSimEngine, type SimEngine } from "../../../server/sim-engine/sim-engine.ts";
import { chatRequest, coreFor, responseJson } from "../../helpers/core.ts";
import { qwen3 } from "../fixtures.ts";

const fixture = new URL("../../fixtures/journal-before-token-store/", import.meta.url);
const expected = JSON.parse(readFileSync(new URL("expected.json", fixture), "utf8")) as {
  bodies: Record<string, { session_id: string; records: unknown[]; metadata: Record<string, unknown> }>;
  samples: Record<string, unknown>;
  histories: Record<string, unknown[]>;
};
const SESSIONS = ["tools", "rolled", "retried", "plain"];
const root = mkdtempSync(join(tmpdir(), "tito-journal-token-store-"));
const dir = join(root, "journal");
let engine: SimEngine;
const cores: SessionCore[] = [];

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: qwen3() });
  cpSync(new URL("journal/", fixture), dir, { recursive: true });
});
test.after(async () => {
  for (const c of cores) await c.close();
  await engine?.close();
  rmSync(root, { recursive: true, force: true });
});

async function replayed(): Promise<SessionCore> {
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

const noBody = { ...chatRequest([]), body: Buffer.alloc(0) };

/** Records, token ids and the sample of a session (the drift report is a re-render with today's family renderer: left out). */
async function state(c: SessionCore, id: string) {
  const body = await responseJson(await c.get(id));
  // engine_api is newer than the fixture: the API the core runs now.
  const { tito_session_mismatch: _drift, engine_api: api, ...ids } = body.metadata;
  assert.is(api, "sglang-chat");
  return { ...body, metadata: ids, sample: await responseJson(await c.samples(id, noBody)) };
}

test("the journal replays to the same records, token ids and samples", async () => {
  const c = await replayed();
  assert.equal(await c.recover(), { sessions: 4, turns: 13 });
  for (const id of SESSIONS) {
    const { tito_session_mismatch: _drift, ...ids } = expected.bodies[id]!.metadata;
    assert.equal(await state(c, id), { ...expected.bodies[id], metadata: ids, sample: expected.samples[id] }, id);
  }
  const deleted = await c.get("deleted");
  assert.is(deleted.status, 404);
});

test("replayed sessions go on: a new turn, a rollback; a second replay gives the same state", async () => {
  const c = cores[0]!;
  const tools = expected.histories.tools!;
  const next = await c.chat("tools", chatRequest([...tools, { role: "user", content: "And Rome?" }]));
  assert.is(next.status, 200);
  const ids = expected.bodies.tools!.metadata.accumulated_token_ids as number[];
  const grown = (await state(c, "tools")).metadata.accumulated_token_ids as number[];
  assert.equal(grown.slice(0, ids.length), ids, "the new turn extends the replayed ids");
  // The last turn of "rolled" sent again with another user message: a one-turn rollback.
  const rolled = expected.histories.rolled!;
  const again = await c.chat("rolled", chatRequest([...rolled.slice(0, -2), { role: "user", content: "Thanks!" }]));
  assert.is(again.status, 200);
  const live = await Promise.all(SESSIONS.map((id) => state(c, id)));
  assert.is((live[1]!.sample as { turns: unknown[] }).turns.length, 4);
  assert.not.equal(live[1], { ...expected.bodies.rolled, sample: expected.samples.rolled });
  const second = await replayed();
  assert.equal(await second.recover(), { sessions: 4, turns: 14 });
  assert.equal(await Promise.all(SESSIONS.map((id) => state(second, id))), live);
});

test.run();
