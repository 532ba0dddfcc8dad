// Idle expiry and the hold timeout with real processes (--session-idle-ttl-s 1,
// --hold-timeout-ms 300): an idle session is deleted and then answers 404 "session
// expired", also after its worker is killed and replays the journal (the expiry is not
// undone, and still known as one); a session whose turn is at the engine longer than the
// TTL is not expired under it; the id can be taken again; the expiries are counted. A chat
// held at the closed door past the hold timeout gets a 503 with Retry-After.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer } from "../../index.ts";
import type { SupervisionEvent } from "../../actors/index.ts";
import type { ErrorBody, SessionBody } from "../helpers/bodies.ts";
import { waitForEvent } from "../helpers/events.ts";
import { admin } from "../helpers/rollout.ts";
import { call, chat, startGatedEngine, type GatedEngine, untilSessionGone } from "../helpers/server.ts";

let engine: GatedEngine;
let server: SessionServer;
const events: SupervisionEvent[] = [];
const USER = [{ role: "user", content: "Hello?" }];

test.before(async () => {
  engine = await startGatedEngine();
  server = await startSessionServer({
    engineUrl: engine.url,
    workers: 1,
    sessionIdleTtlS: 1,
    holdTimeoutMs: 300,
    restartBackoffMs: 50,
    logLevel: "warn",
    onEvent: (event) => events.push(event),
  });
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

test("a turn held at the closed door past --hold-timeout-ms gets 503 with Retry-After", async () => {
  await server.pause({ inFlight: "drain" });
  const { res } = await chat<ErrorBody>(server.url, "no-such-session", USER);
  assert.is(res.status, 503);
  assert.is(res.headers.get("retry-after"), "1");
  assert.is(
    res.json.error,
    "turn held at the door for 300 ms while the server is paused for a weight update (--hold-timeout-ms); retry it after resume",
  );
  assert.equal((await admin(server.url, "GET", "/admin/rollout")).json, {
    state: "paused",
    weight_version: null,
    held: 0,
    in_flight: 0,
  });
  await server.resume("v1");
  const metrics = (await call(server.url, "GET", "/metrics")).text;
  assert.match(metrics, /tito_rollout_hold_seconds_count\{outcome="timeout"\} 1/);
});

test("an idle session expires; a busy one does not; expiry survives a worker restart", async () => {
  const idle = (await server.createSession()).sessionId;
  assert.is((await chat(server.url, idle, USER)).res.status, 200);
  const busy = (await server.createSession()).sessionId;
  const gate = engine.hold();
  const turn = chat(server.url, busy, USER);
  try {
    await gate.arrived;
    // Touched after the busy one's turn began: once it expired, a sweep was past the busy one's due time.
    const marker = (await server.createSession()).sessionId;
    await untilSessionGone(server.url, idle);
    await untilSessionGone(server.url, marker);
    const listed = await call<{ sessions: string[] }>(server.url, "GET", "/sessions");
    assert.ok(listed.json.sessions.includes(busy), "a session with a turn at the engine is never idle");
  } finally {
    gate.release();
  }
  assert.is((await turn).res.status, 200);
  assert.is((await call<SessionBody>(server.url, "GET", `/sessions/${busy}`)).json.records.length, 1);

  const expired = `session expired: session_id=${idle} (it was idle longer than --session-idle-ttl-s and was deleted)`;
  const answers = async () => [
    await call<ErrorBody>(server.url, "GET", `/sessions/${idle}`),
    (await chat<ErrorBody>(server.url, idle, USER)).res,
    await call<ErrorBody>(server.url, "DELETE", `/sessions/${idle}`),
  ];
  for (const res of await answers()) assert.equal([res.status, res.json.error], [404, expired]);
  const metrics = (await call(server.url, "GET", "/metrics")).text;
  assert.match(metrics, /tito_sessions_expired_total\{shard="0"\} [1-9]/);

  const seen = events.length;
  process.kill(server.tree().shards[0]!.pid!, "SIGKILL");
  await waitForEvent(
    server,
    () => events.slice(seen),
    (e) => e.actor === "shard-0" && e.kind === "restarted",
  );
  for (const res of await answers())
    assert.equal([res.status, res.json.error], [404, expired], "replay neither revives it nor forgets why it went");

  // The id is free again: a new session under it.
  assert.is((await call(server.url, "PUT", `/sessions/${idle}`)).status, 201);
  assert.equal((await call<SessionBody>(server.url, "GET", `/sessions/${idle}`)).json.records, []);
});

test.run();
