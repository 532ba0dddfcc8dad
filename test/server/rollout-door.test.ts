// The rollout door on its own (server/router/rollout-door.ts) and the router's admin routes
// through app.inject (no process needed): held turns leave in arrival order, a turn that
// passed but was not sent goes back to the front, a client that leaves takes its turn out,
// a drain waits for the sent turns, every change is reported, a restarted door starts from
// its state; the admin routes validate their bodies, answer a held chat with a retryable
// 503 after --hold-timeout-ms (on a manual clock: test/helpers/manual-clock.ts), and take
// only the admin token.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { RolloutEvent, RolloutState } from "../../actors/index.ts";
import type { Channel } from "../../transport/index.ts";
import { buildRouterApp } from "../../server/router/router-app.ts";
import { SessionTokens } from "../../server/router/router-auth.ts";
import { RolloutDoor, type DoorTurn } from "../../server/router/rollout-door.ts";
import { ShardLinks } from "../../server/router/shard-links.ts";
import { parseServeArgs } from "../../server/host/cli.ts";
import { resolveOptions } from "../../server/host/options.ts";
import { ManualClock } from "../helpers/manual-clock.ts";

const reports: Array<[RolloutState, RolloutEvent | undefined]> = [];
const door = (holdTimeoutMs = 60_000, initial?: RolloutState) =>
  new RolloutDoor({
    holdTimeoutMs,
    initial,
    report: async (state, event) => void reports.push([state, event]),
  });
const noAbort = async () => {};
const signal = () => new AbortController().signal;

/** The order in which turns are let through, by their shard numbers as labels. */
function passOrder(turns: DoorTurn[]): Promise<number[]> {
  const order: number[] = [];
  return Promise.all(turns.map((t) => t.ready().then(() => order.push(t.shard)))).then(() => order);
}

test("held turns pass in arrival order on resume, stamped with the new version when sent", async () => {
  const d = door();
  await d.pause("drain", noAbort);
  const turns = [0, 1, 2].map((i) => d.enter(i, signal()));
  assert.equal(d.status(), { state: "paused", weight_version: null, held: 3, in_flight: 0 });
  const order = passOrder(turns);
  const resumed = await d.resume("v2");
  assert.equal([resumed.released, resumed.previous_weight_version], [3, null]);
  assert.equal(await order, [0, 1, 2]);
  assert.is(d.send(turns[0]!, {} as Channel), "v2");
  assert.equal(d.status(), { state: "running", weight_version: "v2", held: 0, in_flight: 3 });
  for (const t of turns) d.finish(t);
  assert.is(d.status().in_flight, 0);
});

test("a pause sends a passed-but-unsent turn back to the front; a drain waits for the sent one", async () => {
  const d = door();
  const sent = d.enter(0, signal());
  const unsent = d.enter(1, signal());
  d.send(sent, {} as Channel);
  const pausing = d.pause("drain", noAbort);
  assert.is(unsent.state, "held");
  const late = d.enter(2, signal());
  assert.equal(d.status(), { state: "paused", weight_version: null, held: 2, in_flight: 1 });
  let answered = false;
  void pausing.then(() => (answered = true));
  await new Promise((resolve) => setImmediate(resolve));
  assert.is(answered, false, "the sent turn has not answered yet");
  d.finish(sent);
  const outcome = await pausing;
  assert.equal([outcome.drained, outcome.held], [1, 2]);
  const order = passOrder([late, unsent]);
  await d.resume("v1");
  assert.equal(await order, [1, 2], "the recalled turn goes first");
});

test("abort hands the sent turns' channels to the caller once; keep answers at once", async () => {
  const d = door();
  const [a, b] = [{} as Channel, {} as Channel];
  const turns = [d.enter(0, signal()), d.enter(1, signal()), d.enter(0, signal())];
  d.send(turns[0]!, a);
  d.send(turns[1]!, b);
  d.send(turns[2]!, a);
  let told: Channel[] = [];
  const pausing = d.pause("abort", async (channels) => {
    told = channels;
    for (const t of turns) d.finish(t); // the workers answer
  });
  assert.equal((await pausing).aborted, 3);
  assert.equal(told.length, 2);
  await d.resume("v1");
  const kept = d.enter(0, signal());
  d.send(kept, a);
  assert.equal((await d.pause("keep", noAbort)).kept, 1);
});

test("a held turn leaves when its client goes away or its hold times out (on the door's clock)", async () => {
  const clock = new ManualClock();
  const d = new RolloutDoor({ holdTimeoutMs: 600_000, clock });
  await d.pause("keep", noAbort);
  const client = new AbortController();
  const gone = d.enter(0, client.signal);
  const timesOut = d.enter(1, signal());
  const goneErr = gone.ready().catch((err: Error) => err);
  client.abort();
  assert.match(String(await goneErr), /client went away/);
  let timeoutErr: (Error & { status: number }) | undefined;
  void timesOut.ready().catch((err: Error & { status: number }) => (timeoutErr = err));
  await clock.advance(599_999);
  assert.is(timeoutErr, undefined, "still held 1 ms before the hold timeout");
  assert.is(d.status().held, 1);
  await clock.advance(1);
  assert.equal(
    [timeoutErr?.status, timeoutErr?.message],
    [
      503,
      "turn held at the door for 600000 ms while the server is paused for a weight update (--hold-timeout-ms); retry it after resume",
    ],
  );
  assert.is(d.status().held, 0);
  assert.is(clock.pending, 0, "no hold timer left behind");
});

test("every change is reported before it is answered; a door started from a report resumes it", async () => {
  reports.length = 0;
  const d = door();
  await d.pause("keep", noAbort);
  await d.resume("v3");
  await d.pause("drain", noAbort);
  assert.equal(
    reports.map(([state, event]) => [state.state, state.weight_version, event?.kind ?? null]),
    [
      ["paused", null, null],
      ["paused", null, "paused"],
      ["running", "v3", "resumed"],
      ["paused", "v3", null],
      ["paused", "v3", "paused"],
    ],
  );
  const restarted = door(60_000, d.rollout());
  assert.equal(restarted.status(), { state: "paused", weight_version: "v3", held: 0, in_flight: 0 });
  const held = restarted.enter(0, signal());
  assert.is(held.state, "held");
  // Resumed, the held turn passes (and its hold timer is gone: nothing keeps the process up).
  assert.is((await restarted.resume("v4")).released, 1);
  await held.ready();
  assert.equal(restarted.status(), { state: "running", weight_version: "v4", held: 0, in_flight: 1 });
  restarted.finish(held);
});

function app(options: { authToken?: string; holdTimeoutMs?: number; clock?: ManualClock } = {}) {
  return buildRouterApp({
    links: new ShardLinks(1, 0),
    status: { instanceId: "0".repeat(32), tree: null, events: [] },
    bodyLimit: 1024,
    logger: false,
    authToken: options.authToken,
    door: new RolloutDoor({ holdTimeoutMs: options.holdTimeoutMs ?? 60_000, clock: options.clock }),
  });
}

test("admin routes validate their bodies", async () => {
  const a = app();
  const post = (url: string, payload?: string) => a.inject({ method: "POST", url, payload });
  const cases: Array<[string, string | undefined, string]> = [
    [
      "/admin/pause",
      '{"in_flight":"later"}',
      'invalid admin request: in_flight must be one of drain, abort, keep, got "later"',
    ],
    ["/admin/pause", "{nope", "invalid admin request: the body is not JSON: "],
    ["/admin/pause", '{"mode":"drain"}', "invalid admin request: unknown key mode (allowed: in_flight)"],
    ["/admin/resume", undefined, "invalid admin request: weight_version must be a non-empty string"],
    ["/admin/resume", '{"weight_version":7}', "invalid admin request: weight_version must be a non-empty string"],
    ["/admin/resume", "[]", "invalid admin request: the body must be a JSON object"],
  ];
  for (const [url, payload, message] of cases) {
    const res = await post(url, payload);
    assert.is(res.statusCode, 400, `${url} ${payload}`);
    assert.ok(res.json().error.startsWith(message), res.json().error);
  }
  assert.is((await post("/admin/pause")).json().mode, "drain", "an empty body is a drain");
  await a.close();
});

test("a chat held past --hold-timeout-ms gets 503 with Retry-After; the door stays paused", async () => {
  const clock = new ManualClock();
  const a = app({ holdTimeoutMs: 600_000, clock });
  await a.inject({ method: "POST", url: "/admin/pause", payload: '{"in_flight":"keep"}' });
  const held = a.inject({ method: "POST", url: "/sessions/s1/v1/chat/completions", payload: "{}" });
  const rollout = async () => (await a.inject({ method: "GET", url: "/admin/rollout" })).json();
  while ((await rollout()).held === 0) await new Promise((resolve) => setImmediate(resolve));
  await clock.advance(600_000);
  const res = await held;
  assert.is(res.statusCode, 503);
  assert.is(res.headers["retry-after"], "1");
  assert.match(res.json().error, /^turn held at the door for 600000 ms/);
  assert.equal(await rollout(), { state: "paused", weight_version: null, held: 0, in_flight: 0 });
  await a.close();
});

test("with --auth-token the admin routes take the admin token only", async () => {
  const a = app({ authToken: "admin-secret" });
  const sessionToken = new SessionTokens("admin-secret").mint("s1");
  const routes: Array<["GET" | "POST", string, string | undefined]> = [
    ["GET", "/admin/rollout", undefined],
    ["POST", "/admin/pause", '{"in_flight":"keep"}'],
    ["POST", "/admin/resume", '{"weight_version":"v1"}'],
  ];
  for (const [method, url, payload] of routes) {
    const as = (token?: string) =>
      a.inject({ method, url, payload, headers: token ? { authorization: `Bearer ${token}` } : {} });
    assert.is((await as()).statusCode, 401, `${url} without a token`);
    const refused = await as(sessionToken);
    assert.is(refused.statusCode, 403, `${url} with a session token`);
    assert.match(refused.json().error, `${method} ${url} needs the admin token`);
    assert.is((await as("admin-secret")).statusCode, 200, `${url} as the admin`);
  }
  await a.close();
});

test("--hold-timeout-ms and --session-idle-ttl-s: parsed, defaulted and checked", () => {
  const parsed = parseServeArgs(["--hold-timeout-ms", "2500", "--session-idle-ttl-s", "3600"], {});
  assert.ok(parsed !== "help");
  const options = resolveOptions(parsed, { port: 0 });
  assert.equal([options.holdTimeoutMs, options.sessionIdleTtlS], [2500, 3600]);
  const defaults = resolveOptions({}, { port: 0 });
  assert.equal([defaults.holdTimeoutMs, defaults.sessionIdleTtlS], [600_000, 0]);
  assert.throws(
    () => resolveOptions({ holdTimeoutMs: 0 }, { port: 0 }),
    /holdTimeoutMs must be an integer of at least 1, got 0/,
  );
  assert.throws(() => resolveOptions({ sessionIdleTtlS: -1 }, { port: 0 }), /sessionIdleTtlS must be an integer/);
  assert.throws(() => parseServeArgs(["--hold-timeout-ms", "soon"], {}), /--hold-timeout-ms must be a number/);
});

test.run();
