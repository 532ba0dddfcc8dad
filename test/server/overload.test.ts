// Bounded admission (server/router/admission.ts). The queue on its own: arrival order,
// the bound on waiting turns (held turns included), a waiter whose client leaves. Then 10×
// overload through the real tree: --max-inflight-turns 4, --max-queued-turns 16, 64 agents
// at once against a slow simulated engine: never more than 4 generations at the engine,
// every turn answered 200 or 429 (Retry-After, TITO_ERR_OVERLOADED; rate_limit_error on
// the Anthropic route), and exactly one record per 200, none per 429, while the workers'
// RSS (read from /proc) stays within a bound of where it started. Then the order: with the
// engine held, 16 turns of 16 sessions queued one by one reach the engine in the order they
// arrived, one session's turn never overtaking another's.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer } from "../../index.ts";
import { Admission } from "../../server/router/admission.ts";
import { OverloadedError } from "../../server/router/errors.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { readFileSync } from "node:fs";
import { call, newSession } from "../helpers/server.ts";
import type { SessionBody } from "../helpers/bodies.ts";

const live = () => new AbortController().signal;

test("the queue: arrival order, the bound counts held turns, a client that leaves is taken out", async () => {
  let held = 0;
  const a = new Admission({ maxInflight: 1, maxQueued: 3, held: () => held });
  const first = await a.enter(live());
  const order: number[] = [];
  const leaving = new AbortController();
  const waiting = [a.enter(live()), a.enter(leaving.signal), a.enter(live())];
  for (const [i, p] of waiting.entries()) void p.then(() => order.push(i)).catch(() => order.push(-i));
  held = 1;
  await a.enter(live()).then(
    () => assert.unreachable("over the bound"),
    (err) => assert.instance(err, OverloadedError),
  );
  held = 0;
  leaving.abort();
  await new Promise((resolve) => setImmediate(resolve));
  assert.is(a.queued, 2);
  first();
  (await waiting[0]!)();
  (await waiting[2]!)();
  assert.equal(order, [-1, 0, 2]);
  assert.is(a.inflight, 0);
});

let engine: SimEngine;
let server: SessionServer;
let atEngine = 0;
let maxAtEngine = 0;
/** While set, each generation waits at the engine until released, in the order it arrived. */
let holding: Array<{ content: string; release: () => void }> | undefined;

/** A process's resident set size in bytes (/proc/<pid>/status, VmRSS). */
function rss(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+) kB$/m);
  assert.ok(line, `no VmRSS for ${pid}`);
  return Number(line[1]) * 1024;
}

test.before(async () => {
  engine = await startSimEngine({
    beforeReply: async (body) => {
      if (holding) {
        const messages = (body as { messages?: Array<{ content?: unknown }> }).messages ?? [];
        const content = String(messages[messages.length - 1]?.content ?? "");
        await new Promise<void>((release) => holding!.push({ content, release }));
      }
      atEngine++;
      maxAtEngine = Math.max(maxAtEngine, atEngine);
      await new Promise((resolve) => setTimeout(resolve, 150));
    },
    onReplyClosed: () => void atEngine--,
  });
  server = await startSessionServer({
    engineUrl: engine.url,
    engineApi: "sglang-chat",
    workers: 2,
    logLevel: "warn",
    maxInflightTurns: 4,
    maxQueuedTurns: 16,
  });
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

test("10× overload: at most 4 at the engine, every turn a 200 or a 429, none lost or doubled", async () => {
  const base = server.url;
  const ids = await Promise.all(Array.from({ length: 64 }, () => newSession(base)));
  const before = engine.requests;
  const pids = server.tree().shards.map((s) => s.pid!);
  const start = pids.map(rss);
  const peak = [...start];
  const sample = setInterval(() => pids.forEach((pid, i) => (peak[i] = Math.max(peak[i]!, rss(pid)))), 10);
  const messages = [{ role: "user", content: "What is the weather in Paris?" }];
  const answers = await Promise.all(
    ids.map((id, i) =>
      i % 8 === 7
        ? call(base, "POST", `/sessions/${id}/v1/messages`, { model: "m", max_tokens: 50, messages })
        : call(base, "POST", `/sessions/${id}/v1/chat/completions`, { model: "m", messages }),
    ),
  );
  clearInterval(sample);
  pids.forEach((pid, i) => (peak[i] = Math.max(peak[i]!, rss(pid))));
  // Waiting turns wait at the router's door, not in the workers: their memory does not grow with the queue.
  for (const [i, pid] of pids.entries())
    assert.ok(
      peak[i]! - start[i]! < 64 * 1024 * 1024,
      `worker ${pid}: RSS ${start[i]! >> 20} MiB at the start, ${peak[i]! >> 20} MiB at the peak`,
    );
  assert.ok(maxAtEngine <= 4, `${maxAtEngine} generations at the engine at once`);
  assert.ok(maxAtEngine >= 1);
  const ok = answers.filter((r) => r.status === 200).length;
  const refused = answers.filter((r) => r.status === 429);
  assert.is(ok + refused.length, 64, `statuses: ${answers.map((r) => r.status).join(",")}`);
  assert.ok(ok >= 20, `${ok} served: 4 in flight and 16 queued at least`);
  assert.ok(refused.length > 0, "10× the bound: some are refused");
  for (const [i, r] of answers.entries()) {
    if (r.status !== 429) continue;
    assert.is(r.headers.get("retry-after"), "1");
    if (i % 8 === 7) assert.is((r.json as { error: { type: string } }).error.type, "rate_limit_error");
    else assert.is((r.json as { code: string }).code, "TITO_ERR_OVERLOADED");
  }
  assert.is(engine.requests - before, ok, "one generation per served turn");
  const counts = await Promise.all(
    ids.map(async (id) => (await call<SessionBody>(base, "GET", `/sessions/${id}`)).json.records.length),
  );
  assert.equal(
    counts,
    answers.map((r) => (r.status === 200 ? 1 : 0)),
  );
  const metrics = (await call(base, "GET", "/metrics")).text;
  assert.match(metrics, /tito_admission_inflight_turns 0/);
  assert.match(metrics, /tito_admission_queued_turns 0/);
});

/** Polls the router's gauge until it reads `n` (the turn sent last is queued). */
async function queued(base: string, n: number): Promise<void> {
  for (;;) {
    const metrics = (await call(base, "GET", "/metrics")).text;
    if (new RegExp(`^tito_admission_queued_turns ${n}$`, "m").test(metrics)) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

test("waiting turns reach the engine in arrival order, across sessions", async () => {
  const base = server.url;
  const ids = await Promise.all(Array.from({ length: 20 }, () => newSession(base)));
  const arrivals: Array<{ content: string; release: () => void }> = [];
  holding = arrivals;
  const ask = (i: number) =>
    call(base, "POST", `/sessions/${ids[i]}/v1/chat/completions`, {
      model: "m",
      messages: [{ role: "user", content: `agent ${i}` }],
    });
  const arrived = async (n: number) => {
    while (arrivals.length < n) await new Promise((resolve) => setImmediate(resolve));
  };
  const answers: Array<ReturnType<typeof ask>> = [];
  try {
    // Four in flight, held at the engine.
    for (let i = 0; i < 4; i++) answers.push(ask(i));
    await arrived(4);
    // Sixteen more, each queued before the next is sent: their arrival order is known.
    for (let i = 4; i < 20; i++) {
      answers.push(ask(i));
      await queued(base, i - 3);
    }
    // One place at a time: each release lets the oldest waiting turn in, which reaches the
    // engine before the next release.
    for (let served = 0; served < 20; served++) {
      await arrived(Math.min(20, served + 4));
      arrivals[served]!.release();
    }
  } finally {
    holding = undefined;
    arrivals.forEach((h) => h.release());
  }
  const statuses = (await Promise.all(answers)).map((r) => r.status);
  assert.equal(statuses, Array<number>(20).fill(200));
  const order = arrivals.map((a) => a.content);
  assert.equal(order.slice(0, 4).sort(), ["agent 0", "agent 1", "agent 2", "agent 3"]);
  assert.equal(
    order.slice(4),
    Array.from({ length: 16 }, (_, i) => `agent ${i + 4}`),
  );
});

test.run();
