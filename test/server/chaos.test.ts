// Chaos, bounded: 12 agents run tool loops through the HTTP front door for 15 s (CI length;
// TITO_CHAOS_MS sets another, e.g. a soak of minutes) while a
// random worker is killed with SIGKILL every few seconds and, now and then, the router or
// a worker's records streamer. The agents retry what got 502/503 or a connection error
// (test/helpers/retrying-agent.ts). With the journal (the default durability) no session
// is lost, so at the end every session's records must be exactly the turns its agent saw
// answered, in order; no request may have waited past 15 s, and no answer may be a 500 or
// any other surprise. Meanwhile records readers GET sessions (routing replay makes the
// bodies up to a MiB, read with pauses so kills may land mid-body), handed off and relayed: each GET
// either parses whole and holds the session's turns, or fails at the HTTP level, never a
// body cut short that looks complete (docs/http.md); the three are counted.
// Random choices come from a seeded generator; the seed is printed for a rerun.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { randomBytes } from "node:crypto";
import { startSessionServer, type SessionServer, type SupervisionEvent } from "../../index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { RetryingClient, toolLoopSession } from "../helpers/retrying-agent.ts";
import { recordsGet, recordsStreamerOf, type GetOutcome } from "../helpers/records-get.ts";

const AGENTS = 12;
const WORKERS = 2;
const CHAOS_MS = Number(process.env.TITO_CHAOS_MS ?? 15_000);
const TURNS_PER_SESSION = 8;
const REQUEST_BOUND_MS = 15_000;
const READERS = 2;
/** Routing-replay bytes per turn: a session's records GET is up to a MiB or so (more would slow the agents' turns). */
const R3_BYTES = 64 * 1024;

let engine: SimEngine;
let server: SessionServer;
const events: SupervisionEvent[] = [];

/** mulberry32: a small seeded generator, so a failing run can be replayed. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

test.before(async () => {
  // A little generation time, so kills land on turns in flight.
  engine = await startSimEngine({ latencyMs: 15, routedExpertsBytes: R3_BYTES });
  server = await startSessionServer({
    engineUrl: engine.url,
    workers: WORKERS,
    allowedAppendRoles: ["tool", "user"],
    routingReplay: true,
    maxRestarts: 1_000, // the point is to survive the kills, not to escalate
    restartBackoffMs: 50,
    // Every records GET is handed off (the sessions' records are far under the default
    // 1 MiB), so the worker's records streamer runs and its kills are part of the chaos.
    recordsHandoffMinBytes: 0,
    logLevel: "error",
    onEvent: (event) => events.push(event),
  });
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

/**
 * Kills a running child every 1.5–3 s until `until`: every fourth kill the router, else a
 * random worker that is up; and halfway between two kills, a random worker's records streamer (it
 * takes no turns down, only the records GETs it writes).
 */
async function killer(
  random: () => number,
  until: number,
): Promise<{ workers: number; router: number; streamers: number }> {
  const kills = { workers: 0, router: 0, streamers: 0 };
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  while (Date.now() + 1_500 < until) {
    const wait = 1_500 + random() * 1_500;
    await pause(wait / 2);
    const worker = server.tree().shards[Math.floor(random() * WORKERS)]!;
    const streamer = worker.state === "running" && worker.pid ? recordsStreamerOf(worker.pid) : undefined;
    if (streamer !== undefined) {
      process.kill(streamer, "SIGKILL");
      kills.streamers++;
    }
    await pause(wait / 2);
    const tree = server.tree();
    const router = (kills.workers + kills.router) % 4 === 2;
    // A worker that is up (one still restarting from the last kill is not chosen).
    const up = tree.shards.filter((shard) => shard.state === "running" && shard.pid);
    const child = router ? tree.router : up[Math.floor(random() * up.length)];
    if (child?.state !== "running" || !child.pid) continue; // the router still restarting, or no worker up
    process.kill(child.pid, "SIGKILL");
    if (router) kills.router++;
    else kills.workers++;
  }
  return kills;
}

/** A records GET taken during the chaos: the reply ids it held, checked at the end against its agent's. */
interface Snapshot {
  session: string;
  ids: string[];
}

/**
 * GETs random sessions' records until `until`, a fourth over HTTP/1.0 (relayed), the rest
 * HTTP/1.1 (handed off), each paused up to 200 ms after its first bytes; counts how each
 * ended and keeps what the complete ones held.
 */
async function reader(
  random: () => number,
  until: number,
  sessions: Map<string, string[]>,
  counts: Record<GetOutcome | "hung", number>,
  snapshots: Snapshot[],
  cuts: string[],
): Promise<void> {
  while (Date.now() < until) {
    const ids = [...sessions.keys()];
    const session = ids[Math.floor(random() * ids.length)];
    if (session === undefined) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      continue;
    }
    const pause = random() * 200;
    const got = await recordsGet(server.url, `/sessions/${session}`, {
      version: random() < 0.25 ? "1.0" : "1.1",
      boundMs: REQUEST_BOUND_MS,
      midway: () => new Promise((resolve) => setTimeout(resolve, pause)),
    }).catch((err: Error) => ({ outcome: "hung" as const, why: err.message, json: undefined }));
    counts[got.outcome]++;
    if (got.outcome === "cut-clean" || got.outcome === "hung") cuts.push(`${got.outcome} ${session}: ${got.why}`);
    if (got.json) snapshots.push({ session, ids: got.json.records.map((r) => r.response.id!) });
    await new Promise((resolve) => setTimeout(resolve, 100)); // leave the cores to the agents' turns
  }
}

/** A snapshot holds its session's turns: the answered ones in order, the last perhaps one a retry rolled back. */
function holdsTurns(snapshot: Snapshot, answered: readonly string[]): boolean {
  const { ids } = snapshot;
  if (ids.length === 0) return true;
  const last = ids[ids.length - 1]!;
  const before = ids.slice(0, -1);
  return before.every((id, i) => answered[i] === id) && (answered[ids.length - 1] === last || !answered.includes(last));
}

test(`12 agents through ${CHAOS_MS / 1000} s of worker and router kills: records are exactly the answered turns`, async () => {
  const seed = Number(process.env.TITO_CHAOS_SEED ?? randomBytes(4).readUInt32LE(0));
  const random = seeded(seed);
  const until = Date.now() + CHAOS_MS;
  const sessions = new Map<string, string[]>();
  const clients: RetryingClient[] = [];
  const agent = async (a: number) => {
    const client = new RetryingClient(server.url, { timeoutMs: REQUEST_BOUND_MS, random: seeded(seed + a + 1) });
    clients.push(client);
    for (let s = 0; Date.now() < until; s++) {
      const id = randomBytes(16).toString("hex");
      await client.create(id);
      sessions.set(id, []);
      const answered = await toolLoopSession(client, id, TURNS_PER_SESSION, a * 100 + s, () => Date.now() >= until);
      sessions.set(id, answered);
    }
  };
  const gets: Record<GetOutcome | "hung", number> = { complete: 0, errored: 0, "cut-clean": 0, hung: 0 };
  const snapshots: Snapshot[] = [];
  const cuts: string[] = [];
  const readers = Array.from({ length: READERS }, (_, r) =>
    reader(seeded(seed + 1_000 + r), until, sessions, gets, snapshots, cuts),
  );
  const [kills] = await Promise.all([
    killer(random, until),
    ...Array.from({ length: AGENTS }, (_, a) => agent(a)),
    ...readers,
  ]);

  const checker = new RetryingClient(server.url, { timeoutMs: REQUEST_BOUND_MS });
  let exact = 0;
  for (const [id, answered] of sessions) {
    const recorded = await checker.recordIds(id);
    assert.equal(recorded, answered, `session ${id}: records vs the turns its agent saw answered (seed ${seed})`);
    exact++;
  }
  const sum = (pick: (c: RetryingClient) => number) => clients.reduce((n, c) => n + pick(c), 0);
  const unexpected = [...clients, checker].flatMap((c) => c.stats.unexpected);
  const turns = sum((c) => c.stats.turns);
  const statuses: Record<string, number> = {};
  for (const c of clients)
    for (const [status, n] of Object.entries(c.stats.statuses)) statuses[status] = (statuses[status] ?? 0) + n;
  const restarts = events.filter((e) => e.kind === "restarted").length;
  console.log(
    `chaos (seed ${seed}): ${turns} turns answered in ${sessions.size} sessions, all ${exact} exact; ` +
      `killed ${kills.workers} workers and the router ${kills.router} times (${restarts} restarts); ` +
      `${sum((c) => c.stats.retries)} retries, ${sum((c) => c.stats.connectionErrors)} connection errors, ` +
      `statuses ${JSON.stringify(statuses)}; killed ${kills.streamers} records streamers; records GETs: ` +
      `${gets.complete} complete, ${gets.errored} errored, ${gets["cut-clean"]} cut-but-clean, ${gets.hung} hung`,
  );
  assert.equal(cuts, [], `no records GET cut short yet looking complete, none hung (seed ${seed})`);
  // How many complete depends on the machine's load (a GET fails while the router restarts); none may be cut-but-clean.
  assert.ok(gets.complete >= 1, `records GETs went through the chaos: ${JSON.stringify(gets)}`);
  const wrong = snapshots.filter((snapshot) => !holdsTurns(snapshot, sessions.get(snapshot.session)!));
  assert.equal(wrong, [], `every complete records GET holds its session's turns (seed ${seed})`);
  assert.equal(unexpected, [], `no 500, no hang past ${REQUEST_BOUND_MS} ms, no other surprise (seed ${seed})`);
  assert.is(
    sum((c) => c.stats.hung),
    0,
  );
  assert.not.ok(statuses["500"], "no 500");
  assert.ok(
    kills.workers >= 3 && kills.router >= 1 && kills.streamers >= 1,
    `kills that mean something: ${JSON.stringify(kills)}`,
  );
  assert.ok(turns >= 100, `the agents made progress through the chaos: ${turns} turns`);
  server.check(); // the tree rode it out without escalating
});

test.run();
