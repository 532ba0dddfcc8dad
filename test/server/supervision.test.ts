// Supervision of the real tree: kill -9 of a worker (with a chat in flight) and of the
// router, requests during a restart, and lost sessions reported as such. Events are
// awaited, never slept on.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer, type SupervisionEvent } from "../../index.ts";
import { shardOf } from "../../server/shard-protocol.ts";
import { waitForEvent } from "../helpers/events.ts";
import type { ErrorBody, SupervisionBody } from "../helpers/bodies.ts";
import { call, chat, newSession, startGatedEngine, type GatedEngine } from "../helpers/server.ts";

let engine: GatedEngine;
let server: SessionServer;
let base: string;
const WORKERS = 2;

test.before(async () => {
  engine = await startGatedEngine();
  server = await startSessionServer({
    engineUrl: engine.url,
    workers: WORKERS,
    restartBackoffMs: 300,
    maxRestarts: 10,
    logLevel: "warn",
    durability: "memory",
  });
  base = server.url;
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

const seen = () => server.tree() && allEvents;
let allEvents: SupervisionEvent[] = [];
const collect = () => {
  allEvents = [];
  const onEvent = (e: SupervisionEvent) => allEvents.push(e);
  server.on("event", onEvent);
  return () => server.off("event", onEvent);
};

/** An id (for the proxy route, which needs no session) owned by `shard`. */
function idOnShard(shard: number): string {
  for (let i = 0; ; i++) {
    const id = i.toString(16).padStart(32, "0");
    if (shardOf(id, WORKERS) === shard) return id;
  }
}

async function sessionOnShard(shard: number): Promise<string> {
  for (let i = 0; i < 64; i++) {
    const id = await newSession(base);
    if (shardOf(id, WORKERS) === shard) return id;
  }
  throw new Error(`no session landed on shard ${shard}`);
}

test("kill -9 of a worker with a chat in flight: 503 at once, then a clean restart", async () => {
  const stop = collect();
  const id = await newSession(base);
  const shard = shardOf(id, WORKERS);
  const actor = `shard-${shard}`;
  const oldPid = server.tree().shards[shard].pid!;
  const gate = engine.hold();
  const inFlight = chat(base, id, [{ role: "user", content: "slow question" }]);
  await gate.arrived;
  process.kill(oldPid, "SIGKILL");
  const { res } = await inFlight; // resolves while the engine still holds the reply
  gate.release();
  assert.is(res.status, 503);
  assert.equal(res.json, { error: "session worker unavailable", code: "TITO_ERR_WORKER_UNAVAILABLE" });

  await waitForEvent(server, seen, (e) => e.actor === actor && e.kind === "restarted");
  const mine = allEvents.filter((e) => e.actor === actor);
  assert.equal(
    mine.map((e) => e.kind),
    ["exited", "restarting", "spawned", "ready", "restarted"],
  );
  assert.equal(mine[0].detail, { code: null, signal: "SIGKILL" });
  assert.is(mine[0].pid, oldPid);
  const tree = server.tree();
  assert.is.not(tree.shards[shard].pid, oldPid);
  assert.is(tree.shards[shard].restarts, 1);
  assert.is(tree.shards[shard].state, "running");
  // The router's copy (GET /supervision) follows over IPC.
  let overHttp = (await call<SupervisionBody>(base, "GET", "/supervision")).json;
  const same = () => JSON.stringify(overHttp.shards[shard]) === JSON.stringify(tree.shards[shard]);
  for (let i = 0; i < 100 && !same(); i++) {
    await new Promise((r) => setTimeout(r, 20));
    overHttp = (await call<SupervisionBody>(base, "GET", "/supervision")).json;
  }
  assert.equal(overHttp.shards[shard], tree.shards[shard]);

  const lost = await call<ErrorBody>(base, "GET", `/sessions/${id}`);
  assert.is(lost.status, 404);
  assert.match(lost.json.error, new RegExp(`^session not found: session_id=${id}`));
  assert.match(lost.json.error, /restarted/);

  const fresh = await sessionOnShard(shard);
  const turn = await chat(base, fresh, [{ role: "user", content: "hello again" }]);
  assert.is(turn.res.status, 200);
  stop();
});

test("requests arriving during a restart wait for the new worker and succeed", async () => {
  const stop = collect();
  const shard = 1;
  const actor = `shard-${shard}`;
  process.kill(server.tree().shards[shard].pid!, "SIGKILL");
  await waitForEvent(server, seen, (e) => e.actor === actor && e.kind === "restarting");
  const during = await call(base, "GET", `/sessions/${idOnShard(shard)}/v1/models`);
  assert.is(during.status, 200, during.text);
  assert.ok(
    allEvents.some((e) => e.actor === actor && e.kind === "ready"),
    "answered by the new worker",
  );
  await waitForEvent(server, seen, (e) => e.actor === actor && e.kind === "restarted");
  stop();
});

test("kill -9 of the router: it comes back on the same URL and sessions keep their records", async () => {
  const stop = collect();
  const id = await newSession(base);
  const turn = await chat(base, id, [{ role: "user", content: "remember me" }]);
  assert.is(turn.res.status, 200);
  const before = await call(base, "GET", `/sessions/${id}`);
  process.kill(server.tree().router.pid!, "SIGKILL");
  await waitForEvent(server, seen, (e) => e.actor === "router" && e.kind === "restarted");
  const after = await call(base, "GET", `/sessions/${id}`);
  assert.is(after.status, 200);
  assert.is(after.text, before.text);
  assert.is(server.tree().router.restarts, 1);
  stop();
});

test.run();
