// Explicit forks (POST /sessions/{id}/fork, issue 43), with real processes and a journal:
// a session forked at turn 5 three ways, then 2 turns on each fork, gives records whose
// shared prefix is the parent's own bytes and whose later turns continue from its exact
// ids; turns and rollbacks on either side never show on the other; the errors have their
// codes; kill -9 of the worker replays every fork byte for byte; another worker count
// (a re-shard, forks copied whole where their parent goes elsewhere) keeps them.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ForkSessionError, startSessionServer, type SessionServer } from "../../index.ts";
import { shardOf } from "../../server/protocol/shard-protocol.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { killAndAwaitRestart } from "../helpers/events.ts";
import { call, chat, newSession } from "../helpers/server.ts";

const WORKERS = 2;
let engine: SimEngine;
const root = mkdtempSync(join(tmpdir(), "tito-forks-test-"));
const dataDir = join(root, "data");
let server: SessionServer;
let base: string;

async function start(workers: number): Promise<void> {
  server = await startSessionServer({
    engineUrl: engine.url,
    workers,
    dataDir,
    allowedAppendRoles: ["user"],
    restartBackoffMs: 50,
    logLevel: "warn",
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

interface Body {
  records: { request: { input_ids: number[] } }[];
  metadata: { accumulated_token_ids: number[] };
}
const getBody = async (id: string) => {
  const res = await call<Body>(base, "GET", `/sessions/${id}`);
  assert.is(res.status, 200, `GET ${id}: ${res.text.slice(0, 200)}`);
  return res;
};

/** `turns` more user turns on `id` after `messages`; returns the history. */
async function converse(id: string, messages: unknown[], turns: number, tag: string): Promise<unknown[]> {
  const history = [...messages];
  for (let k = 0; k < turns; k++) {
    history.push({ role: "user", content: `${tag} question ${k}` });
    const { res, message } = await chat(base, id, history);
    assert.is(res.status, 200, res.text);
    history.push(message);
  }
  return history;
}

const fork = (id: string, body: unknown) =>
  call<{ session_id: string; code?: string; error?: string }>(base, "POST", `/sessions/${id}/fork`, body);

/** An id the router would place on `shard`, and that with 3 workers goes with `other` or not. */
function idOn(shard: number, tag: string, other?: { id: string; together: boolean }): string {
  for (let i = 0; ; i++) {
    const id = `${tag}-${i}`;
    if (shardOf(id, WORKERS) !== shard) continue;
    if (!other || (shardOf(id, 3) === shardOf(other.id, 3)) === other.together) return id;
  }
}

let parent: string;
let parentHistory: unknown[];
const forks: { id: string; history: unknown[] }[] = [];
const bodies = new Map<string, string>();

test("a 3-way fork at turn 5, then 2 turns per fork: the shared prefix is the parent's records, byte for byte", async () => {
  parent = await newSession(base);
  parentHistory = await converse(parent, [], 6, "parent"); // turns 0..5
  const before = await getBody(parent);
  const shard = shardOf(parent, WORKERS);
  // Placed so that a re-shard to 3 workers puts one with the parent and one elsewhere.
  const named = idOn(shard, "named-fork", { id: parent, together: false });
  const together = idOn(shard, "together-fork", { id: parent, together: true });
  const made = [
    await fork(parent, { at: 5 }),
    await fork(parent, { at: 5, session_id: named }),
    await server
      .fork(parent, 5, { sessionId: together })
      .then((f) => ({ status: 201, json: { session_id: f.sessionId }, shard: f.shard })),
  ];
  for (const m of made) assert.is(m.status, 201, JSON.stringify(m.json));
  assert.is(made[1]!.json.session_id, named, "the caller's id");
  assert.is(made[2]!.json.session_id, together, "the caller's id, through server.fork()");
  for (const m of made) assert.is(shardOf(m.json.session_id, WORKERS), shard, "a fork lives on its parent's shard");
  const history = parentHistory; // the path up to and including turn 5 is all of it
  for (const [i, m] of made.entries()) {
    const id = m.json.session_id;
    const fresh = await getBody(id);
    assert.is(fresh.json.records.length, 6);
    assert.equal(fresh.json.metadata.accumulated_token_ids, before.json.metadata.accumulated_token_ids);
    forks.push({ id, history: await converse(id, history, 2, `fork ${i}`) });
  }
  parentHistory = await converse(parent, parentHistory, 1, "parent again");
  const parentRecords = JSON.parse((await getBody(parent)).text).records;
  assert.is(parentRecords.length, 7, "the forks' turns are not the parent's");
  const tails = new Set<string>();
  for (const f of forks) {
    const body = await getBody(f.id);
    const records = JSON.parse(body.text).records as unknown[];
    assert.is(records.length, 8);
    for (let k = 0; k < 6; k++)
      assert.is(
        JSON.stringify(records[k]),
        JSON.stringify(parentRecords[k]),
        `fork ${f.id}: record ${k} is the parent's`,
      );
    const prefix = before.json.metadata.accumulated_token_ids;
    assert.equal(
      body.json.records[6]!.request.input_ids.slice(0, prefix.length),
      prefix,
      "continues from the exact ids",
    );
    tails.add(JSON.stringify(records.slice(6)));
  }
  assert.is(tails.size, 3, "each fork has its own turns");
});

test("isolation: a rollback on a fork and on the parent leave the other as it was", async () => {
  const [a, b] = forks;
  const bBefore = (await getBody(b!.id)).text;
  // Fork a retries its last turn: a rollback of one turn in a, nothing in b or the parent.
  const retry = [...a!.history.slice(0, -2), { role: "user", content: "asked differently" }];
  const { res, message } = await chat(base, a!.id, retry);
  assert.is(res.status, 200, res.text);
  a!.history = [...retry, message];
  const parentBefore = (await getBody(parent)).text;
  const rolled = [...parentHistory.slice(0, -2), { role: "user", content: "parent asked differently" }];
  const again = await chat(base, parent, rolled);
  assert.is(again.res.status, 200, again.res.text);
  parentHistory = [...rolled, again.message];
  assert.is((await getBody(b!.id)).text, bBefore, "fork b is untouched");
  assert.is.not((await getBody(parent)).text, parentBefore);
  const aRecords = (await getBody(a!.id)).json.records;
  assert.is(aRecords.length, 8);
  // A fork of a fork keeps the path, and deleting the parent keeps every fork.
  const grand = await fork(a!.id, { at: 6 });
  assert.is(grand.status, 201, grand.text);
  assert.is((await getBody(grand.json.session_id)).json.records.length, 7);
  forks.push({ id: grand.json.session_id, history: a!.history.slice(0, -2) });
});

test("errors: unknown session 404, a turn it does not have 409, a bad body 400, a taken or misplaced id 409", async () => {
  const code = async (id: string, body: unknown) => {
    const res = await fork(id, body);
    return [res.status, res.json?.code];
  };
  assert.equal(await code("nope", { at: 0 }), [404, "TITO_ERR_SESSION_NOT_FOUND"]);
  assert.equal(await code(parent, { at: 7 }), [409, "TITO_ERR_FORK_TURN"]);
  const empty = await newSession(base);
  assert.equal(await code(empty, { at: 0 }), [409, "TITO_ERR_FORK_TURN"], "a session without turns");
  for (const bad of [{}, { at: -1 }, { at: 1.5 }, { at: "1" }, { at: 0, extra: 1 }, { at: 0, session_id: 5 }, "x"])
    assert.equal(await code(parent, bad), [400, "TITO_ERR_INVALID_FORK_REQUEST"], JSON.stringify(bad));
  assert.equal(await code(parent, { at: 0, session_id: forks[0]!.id }), [409, "TITO_ERR_SESSION_EXISTS"]);
  assert.equal(await code(parent, { at: 0, session_id: "bad id!" }), [400, "TITO_ERR_INVALID_SESSION_ID"]);
  const elsewhere = idOn(1 - shardOf(parent, WORKERS), "elsewhere");
  assert.equal(await code(parent, { at: 0, session_id: elsewhere }), [409, "TITO_ERR_FORK_PLACEMENT"]);
  assert.is((await call(base, "GET", `/sessions/${elsewhere}`)).status, 404, "nothing was made");
  const err = await server.fork("nope", 0).catch((e: unknown) => e);
  assert.instance(err, ForkSessionError);
  assert.equal([(err as ForkSessionError).status, (err as ForkSessionError).code], [404, "TITO_ERR_FORK_SESSION"]);
  // A finished (aborted) session forks into a live one.
  const done = await newSession(base);
  const history = await converse(done, [], 1, "finished");
  assert.is((await call(base, "POST", `/sessions/${done}/abort`)).status, 200);
  const live = await fork(done, { at: 0 });
  assert.is(live.status, 201, live.text);
  await converse(live.json.session_id, history, 1, "after the abort");
  const metrics = (await call(base, "GET", "/metrics")).text;
  assert.match(metrics, /tito_forks_total\{shard="\d"\} [1-9]/);
});

test("kill -9 of the worker: the parent and every fork replay byte for byte, and go on", async () => {
  // The parent deleted first: its forks keep the records they share with it.
  const parentBody = (await getBody(parent)).text;
  const ids = [parent, ...forks.map((f) => f.id)];
  for (const id of ids) bodies.set(id, (await getBody(id)).text);
  assert.is((await call(base, "DELETE", `/sessions/${parent}`)).status, 204);
  bodies.delete(parent);
  await killAndAwaitRestart(server, shardOf(parent, WORKERS));
  for (const [id, body] of bodies) assert.is((await getBody(id)).text, body, `${id} after the replay`);
  assert.is((await call(base, "GET", `/sessions/${parent}`)).status, 404, "the deleted parent stays deleted");
  assert.ok(parentBody.length > 0);
  const f = forks[1]!;
  f.history = await converse(f.id, f.history, 1, "after the crash");
  bodies.set(f.id, (await getBody(f.id)).text);
});

test("another worker count: the journal is re-sharded and every fork comes back byte for byte", async () => {
  await server.shutdown();
  // 3 workers: some forks land with their (deleted) parent's entries, others are copied whole.
  await start(3);
  const placed = new Set([...bodies.keys()].map((id) => shardOf(id, 3) === shardOf(parent, 3)));
  assert.equal(placed, new Set([true, false]), "both kinds are exercised");
  for (const [id, body] of bodies) assert.is((await getBody(id)).text, body, `${id} with 3 workers`);
  const f = forks[2]!;
  const { res } = await chat(base, f.id, [...f.history, { role: "user", content: "after the re-shard" }]);
  assert.is(res.status, 200, res.text);
});

test.run();
