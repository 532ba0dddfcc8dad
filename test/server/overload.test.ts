// Bounded admission (server/router/admission.ts). The queue on its own: arrival order,
// the bound on waiting turns (held turns included), a waiter whose client leaves. Then 10×
// overload through the real tree: --max-inflight-turns 4, --max-queued-turns 16, 64 agents
// at once against a slow simulated engine: never more than 4 generations at the engine,
// every turn answered 200 or 429 (Retry-After, TITO_ERR_OVERLOADED; rate_limit_error on
// the Anthropic route), and exactly one record per 200, none per 429.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer } from "../../index.ts";
import { Admission } from "../../server/router/admission.ts";
import { OverloadedError } from "../../server/router/errors.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
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

test.before(async () => {
  engine = await startSimEngine({
    beforeReply: async () => {
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
  const messages = [{ role: "user", content: "What is the weather in Paris?" }];
  const answers = await Promise.all(
    ids.map((id, i) =>
      i % 8 === 7
        ? call(base, "POST", `/sessions/${id}/v1/messages`, { model: "m", max_tokens: 50, messages })
        : call(base, "POST", `/sessions/${id}/v1/chat/completions`, { model: "m", messages }),
    ),
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

test.run();
