// Forks of a tree-mode session at a node id (POST /sessions/{id}/fork {"at": "n<k>"}, issue
// 43; docs/trajectories.md, "Forks"), with real processes and a journal: the fork holds the
// path from the root down to the node as a chain n0, n1, … whose records are the parent's
// bytes and whose samples equal the parent's sample of that leaf; a fork at a node off the
// parent's held path leaves the parent's view as it was; turns on the fork attach under its
// nodes and never show on the parent; the errors have their codes; kill -9 of the worker
// replays the forks byte for byte and a re-shard (a fork copied whole where its parent goes
// elsewhere) keeps them.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSessionServer, type SessionServer } from "../../index.ts";
import { shardOf } from "../../server/protocol/shard-protocol.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { killAndAwaitRestart } from "../helpers/events.ts";
import { call, chat } from "../helpers/server.ts";

const WORKERS = 2;
let engine: SimEngine;
const root = mkdtempSync(join(tmpdir(), "tito-tree-forks-test-"));
const dataDir = join(root, "data");
let server: SessionServer;
let base: string;

async function start(workers: number): Promise<void> {
  server = await startSessionServer({
    ...{ engineUrl: engine.url, workers, dataDir, logLevel: "warn" },
    ...{ allowedAppendRoles: ["user"], restartBackoffMs: 50 },
  });
  base = server.url;
}

test.before(async () => {
  engine = await startSimEngine();
  await start(WORKERS);
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
  rmSync(root, { recursive: true, force: true });
});

interface SessionBody {
  records: { node_id: string; parent: string | null; retry_of: string | null; request: unknown; response: unknown }[];
  metadata: { accumulated_token_ids: number[] };
}
interface Samples {
  samples: Record<string, unknown>[];
}

const get = (id: string) => call<SessionBody>(base, "GET", `/sessions/${id}`);
const fork = (id: string, body: unknown) =>
  call<{ session_id: string; code?: string; error?: string }>(base, "POST", `/sessions/${id}/fork`, body);
const samples = (id: string, leaves: string[]) => call<Samples>(base, "POST", `/sessions/${id}/samples`, { leaves });
const user = (content: string) => ({ role: "user", content });

async function turn(id: string, messages: unknown[]): Promise<unknown> {
  const { res, message } = await chat(base, id, messages);
  assert.is(res.status, 200, res.text);
  return message;
}

/** An id the router places on `shard` with 2 workers, and that with 3 goes with `other` or not. */
function idOn(shard: number, tag: string, other: string, together: boolean): string {
  for (let i = 0; ; i++) {
    const id = `${tag}-${i}`;
    if (shardOf(id, WORKERS) === shard && (shardOf(id, 3) === shardOf(other, 3)) === together) return id;
  }
}

/** Every view of a session that must come back the same after a replay or a re-shard. */
async function views(id: string): Promise<string[]> {
  return [
    (await get(id)).text,
    (await call(base, "GET", `/sessions/${id}/tree`)).text,
    (await call(base, "POST", `/sessions/${id}/samples`, {})).text,
    (await call(base, "POST", `/sessions/${id}/samples`, { packed: true })).text,
  ];
}

const PARENT = "tree-fork-parent";
const kept = new Map<string, string[]>();
let h1: unknown[];
let atN2: string;

test("a fork at a node holds its path as a chain of the parent's records, exact to the parent's sample", async () => {
  assert.is((await call(base, "PUT", `/sessions/${PARENT}`, { trajectory: "tree" })).status, 201);
  const a0 = await turn(PARENT, [user("one")]); // n0
  h1 = [user("one"), a0, user("two")];
  await turn(PARENT, h1); // n1
  const a2 = await turn(PARENT, h1); // n2: a retry of n1
  await turn(PARENT, [...h1, a2, user("three")]); // n3, under n2: the parent holds n0 n2 n3 now
  const parentBefore = await get(PARENT);
  assert.is(parentBefore.json.records.length, 4);

  // n2 is on the held path; n1 is not (the parent's view is moved for the fork, then back).
  atN2 = idOn(shardOf(PARENT, WORKERS), "at-n2", PARENT, false);
  const made = await fork(PARENT, { at: "n2", session_id: atN2 });
  assert.is(made.status, 201, made.text);
  const atN1 = (await server.fork(PARENT, "n1")).sessionId;
  assert.is((await get(PARENT)).text, parentBefore.text, "the parent's records and held ids are as they were");

  for (const [id, node] of [
    [atN2, 2],
    [atN1, 1],
  ] as const) {
    const records = (await get(id)).json.records;
    const expected = [parentBefore.json.records[0]!, parentBefore.json.records[node]!];
    assert.equal(
      records.map((r) => [r.node_id, r.parent, r.retry_of]),
      [
        ["n0", null, null],
        ["n1", "n0", null],
      ],
    );
    assert.equal(
      records.map((r) => [r.request, r.response]),
      expected.map((r) => [r.request, r.response]),
      `${id}: the path's records, byte for byte`,
    );
    // The fork's only leaf is the parent's node: the same sample, ids, logprobs and all.
    const mine = (await samples(id, ["n1"])).json.samples[0]!;
    const theirs = (await samples(PARENT, [`n${node}`])).json.samples[0]!;
    assert.equal({ ...mine, leaf: null, session_id: null }, { ...theirs, leaf: null, session_id: null });
  }
  // The turn the parent took after n2 is not in the fork; the fork's own turns are its own.
  const on = await turn(atN2, [...h1, a2, user("three, on the fork")]);
  await turn(atN2, h1); // n1's history again: a retry of the fork's n1 (the parent's n2)
  const outline = (
    await call<{ nodes: { node: string; parent: string | null; retry_of: string | null }[] }>(
      base,
      "GET",
      `/sessions/${atN2}/tree`,
    )
  ).json.nodes;
  assert.equal(
    outline.map((n) => [n.node, n.parent, n.retry_of]),
    [
      ["n0", null, null],
      ["n1", "n0", null],
      ["n2", "n1", null],
      ["n3", "n0", "n1"],
    ],
  );
  assert.ok(on);
  assert.is((await get(PARENT)).text, parentBefore.text, "turns on the fork never show on the parent");
  for (const id of [PARENT, atN2, atN1]) kept.set(id, await views(id));
});

test("errors: a turn index on a tree, a node it lacks, a node id on a linear session, a bad id", async () => {
  const index = await fork(PARENT, { at: 1 });
  assert.equal([index.status, index.json.code], [409, "TITO_ERR_FORK_TREE"], index.text);
  const missing = await fork(PARENT, { at: "n4" });
  assert.equal([missing.status, missing.json.code], [409, "TITO_ERR_FORK_NODE"], missing.text);
  assert.match(missing.json.error!, /n0 to n3/);
  const linear = (await call<{ session_id: string }>(base, "POST", "/sessions")).json.session_id;
  await turn(linear, [user("one")]);
  const onLinear = await fork(linear, { at: "n0" });
  assert.equal([onLinear.status, onLinear.json.code], [409, "TITO_ERR_FORK_NODE"], onLinear.text);
  for (const at of ["x", "n", "n01", "N1", -1, 1.5, null])
    assert.is((await fork(PARENT, { at })).json.code, "TITO_ERR_INVALID_FORK_REQUEST", JSON.stringify(at));
  // A linear session still forks at a turn index.
  assert.is((await fork(linear, { at: 0 })).status, 201);
});

test("kill -9 replays the forks byte for byte; another worker count keeps them", async () => {
  const shard = shardOf(PARENT, WORKERS);
  await killAndAwaitRestart(server, shard);
  for (const [id, before] of kept) assert.equal(await views(id), before, `${id} after kill -9`);
  await server.shutdown();
  // 3 workers: the fork at n2 lands apart from its parent and is written out whole.
  await start(3);
  assert.is.not(shardOf(atN2, 3), shardOf(PARENT, 3));
  for (const [id, before] of kept) assert.equal(await views(id), before, `${id} after a re-shard`);
  await turn(atN2, [...h1, user("after the re-shard")]);
});

test.run();
