// Supervision of the real tree: /supervision and the workers' memory metrics (real
// processes), kill -9 of a worker (with a chat in flight) and of the router, requests
// during a restart, and lost sessions reported as such. Events are awaited, never slept on.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer, type SupervisionEvent } from "../../index.ts";
import { shardOf } from "../../server/protocol/shard-protocol.ts";
import { waitForEvent } from "../helpers/events.ts";
import type { ErrorBody, EventsBody, SupervisionBody } from "../helpers/bodies.ts";
import { call, chat, newSession, startGatedEngine, type GatedEngine } from "../helpers/server.ts";

let engine: GatedEngine;
let server: SessionServer;
let base: string;
const WORKERS = 2;

test.before(async () => {
  // Its context length fits the ~100k-token turn of the memory test (budgets read it: issue 44).
  engine = await startGatedEngine({ maxModelLen: 131_072 });
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

/** The value of one sample line of Prometheus text, 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number {
  for (const line of text.split("\n")) {
    if (!line.startsWith(name + "{") && !line.startsWith(name + " ")) continue;
    const inner = /\{(.*)\}/.exec(line)?.[1] ?? "";
    if (Object.entries(labels).every(([k, v]) => inner.includes(`${k}="${v}"`))) return Number(line.split(" ").at(-1));
  }
  return 0;
}

test("GET /supervision and /supervision/events describe the tree", async () => {
  const tree = await call<SupervisionBody>(base, "GET", "/supervision");
  assert.is(tree.status, 200);
  assert.is(tree.json.state, "running");
  assert.is(tree.json.host_pid, process.pid);
  assert.is(tree.json.failure, null);
  assert.is(tree.json.shards.length, WORKERS);
  assert.ok(tree.json.router.pid! > 0);
  for (const shard of tree.json.shards) assert.is(shard.state, "running");
  const events = await call<EventsBody>(base, "GET", "/supervision/events?since=0");
  const kinds = events.json.events.map((e) => `${e.actor}:${e.kind}`);
  for (const actor of ["router", "shard-0", "shard-1"]) {
    assert.ok(kinds.includes(`${actor}:spawned`) && kinds.includes(`${actor}:ready`), kinds.join(" "));
  }
  const last = events.json.events.at(-1)!.seq;
  const none = await call<EventsBody>(base, "GET", `/supervision/events?since=${last}`);
  assert.equal(none.json.events, []);
  // `since` is one non-negative decimal integer; anything else is a coded 400 that says so.
  for (const query of [
    "since=abc",
    "since=-1",
    "since=1.5",
    "since=1e3",
    "since=",
    "since=1&since=2",
    "since=99999999999999999999",
  ]) {
    const bad = await call<{ error: string; code: string }>(base, "GET", `/supervision/events?${query}`);
    assert.is(bad.status, 400, query);
    assert.equal(bad.json, { error: "querystring/since must be integer", code: "TITO_ERR_BAD_REQUEST" }, query);
  }
  const all = await call<EventsBody>(base, "GET", "/supervision/events");
  assert.is(all.json.events[0]!.seq, events.json.events[0]!.seq, "no since: from the start");
  const tail = await call<EventsBody>(base, "GET", `/supervision/events?since=${last - 1}`);
  assert.equal(
    tail.json.events.map((e) => e.seq),
    [last],
    "since=N: the events after N",
  );
});

test("GET /metrics: every worker's memory; with ?gc=1 read after a full GC (a deleted session's memory gone), with code and bytecode", async () => {
  const MEMORY = [
    "process_resident_memory_bytes",
    "nodejs_heap_size_used_bytes",
    "nodejs_heap_size_total_bytes",
    "nodejs_heap_code_used_bytes",
    "nodejs_external_memory_bytes",
  ];
  const plain = (await call(base, "GET", "/metrics")).text;
  for (let shard = 0; shard < WORKERS; shard++)
    for (const name of MEMORY)
      assert.ok(sample(plain, name, { shard: String(shard) }) > 0, `${name} of shard ${shard}`);
  // A session holding ~600 KB of text and ~100k token ids on its worker, then deleted.
  const id = await newSession(base);
  const shard = { shard: String(shardOf(id, WORKERS)) };
  const turn = await chat(base, id, [{ role: "user", content: "hello ".repeat(100_000) }]);
  assert.is(turn.res.status, 200);
  const live = (text: string) =>
    sample(text, "nodejs_heap_size_used_bytes", shard) + sample(text, "nodejs_external_memory_bytes", shard);
  const held = (await call(base, "GET", "/metrics?gc=1")).text;
  assert.ok(sample(held, "nodejs_heap_size_used_bytes", shard) <= sample(held, "nodejs_heap_size_total_bytes", shard));
  assert.ok(sample(held, "process_resident_memory_bytes", shard) > sample(held, "nodejs_heap_size_used_bytes", shard));
  const code = sample(held, "nodejs_heap_code_used_bytes", shard);
  assert.ok(
    code > 0 && code < sample(held, "nodejs_heap_size_used_bytes", shard),
    `code ${code} is part of the heap used`,
  );
  // Code and bytecode as V8 counts them (a walk of the heap): only after a GC.
  assert.not.ok(plain.includes("nodejs_heap_compiled_bytes{"), "not read by a plain scrape");
  const compiled = ["code", "bytecode"].map((kind) => sample(held, "nodejs_heap_compiled_bytes", { ...shard, kind }));
  assert.ok(
    compiled.every((n) => n > 0) && compiled[0]! + compiled[1]! < sample(held, "nodejs_heap_size_used_bytes", shard),
    `code and bytecode ${compiled.join(", ")} are part of the heap used`,
  );
  assert.is((await call(base, "DELETE", `/sessions/${id}`)).status, 204);
  const gone = (await call(base, "GET", "/metrics?gc=1")).text;
  // Without the forced GC the deleted session's strings and ids would still be counted.
  assert.ok(live(held) - live(gone) > 500_000, `heap + external went from ${live(held)} to ${live(gone)}`);
});

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
