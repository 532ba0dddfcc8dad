// Sessions created by the client's id (PUT /sessions/{id}), the paged listing
// (GET /sessions), and x-tito-instance on every response, through real processes: the
// embedding API, 2 workers, a journal, and a worker kill -9 between creating and re-creating.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { CreateSessionError, startSessionServer, type SessionServer } from "../../index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { call } from "../helpers/server.ts";

const ADMIN = "admin-token-for-put-tests";
const admin = { authorization: `Bearer ${ADMIN}` };
const dir = mkdtempSync(join(tmpdir(), "tito-put-test-"));
let engine: SimEngine;
let server: SessionServer;
let instanceId = "";

test.before(async () => {
  engine = await startSimEngine();
  server = await startSessionServer({
    engineUrl: engine.url,
    workers: 2,
    port: 0,
    dataDir: join(dir, "data"),
    authToken: ADMIN,
    logLevel: "warn",
  });
  instanceId = (await call<{ session_server_instance_id: string }>(server.url, "GET", "/health")).json
    .session_server_instance_id;
});

test.after(async () => {
  await server?.shutdown();
  await engine?.close();
  rmSync(dir, { recursive: true, force: true });
});

test("PUT /sessions/{id}: 201 with the id and its token, 409 when it exists, 400 for a bad id", async () => {
  const created = await call<{ session_id: string; session_token: string }>(
    server.url,
    "PUT",
    "/sessions/agent.7~b-x_1",
    undefined,
    admin,
  );
  assert.is(created.status, 201, created.text);
  assert.is(created.json.session_id, "agent.7~b-x_1");
  assert.match(created.json.session_token, /^tst_/);
  const chat = await call(
    server.url,
    "POST",
    "/sessions/agent.7~b-x_1/v1/chat/completions",
    { model: "m", messages: [{ role: "user", content: "hi" }] },
    { authorization: `Bearer ${created.json.session_token}` },
  );
  assert.is(chat.status, 200, "the token PUT gave works for the session");
  const again = await call<{ error: string }>(server.url, "PUT", "/sessions/agent.7~b-x_1", undefined, admin);
  assert.is(again.status, 409);
  assert.is(again.json.error, "session already exists: session_id=agent.7~b-x_1");
  for (const bad of ["bad%20id", "a*b", "x".repeat(129), "y".repeat(300), "z".repeat(2000)]) {
    const res = await call<{ error: string }>(server.url, "PUT", `/sessions/${bad}`, undefined, admin);
    assert.is(res.status, 400, `${bad.slice(0, 20)}: ${res.status} ${res.text}`);
    assert.match(res.json.error, /1-128 characters of \[A-Za-z0-9._~-\]/);
  }
});

test("a journalled session is still taken after its worker is killed and replays", async () => {
  const { sessionId, shard } = await server.createSession("survivor-1");
  assert.is(sessionId, "survivor-1");
  const pid = server.tree().shards[shard]!.pid!;
  process.kill(pid, "SIGKILL");
  let status = 0;
  for (let i = 0; i < 200 && status !== 409; i++) {
    await new Promise((r) => setTimeout(r, 50));
    status = (await call(server.url, "PUT", "/sessions/survivor-1", undefined, admin)).status;
  }
  assert.is(status, 409, "the replayed session still owns its id");
  try {
    await server.createSession("survivor-1");
    assert.unreachable("createSession of a taken id must reject");
  } catch (err) {
    assert.instance(err, CreateSessionError);
    assert.is((err as CreateSessionError).status, 409);
  }
});

test("GET /sessions pages through every worker's sessions in id order", async () => {
  const ids = Array.from({ length: 23 }, (_, i) => `page-${String(i).padStart(2, "0")}`);
  for (const id of ids) await server.createSession(id);
  const seen: string[] = [];
  let after: string | null = "";
  let pages = 0;
  while (after !== null) {
    const res: { status: number; json: { sessions: string[]; next: string | null } } = await call(
      server.url,
      "GET",
      `/sessions?limit=7&after=${encodeURIComponent(after)}`,
      undefined,
      admin,
    );
    assert.is(res.status, 200);
    assert.ok(res.json.sessions.length <= 7);
    seen.push(...res.json.sessions);
    after = res.json.next;
    pages++;
    assert.ok(pages < 20, "the listing ends");
  }
  assert.equal(seen, [...seen].sort(), "id order");
  assert.equal(new Set(seen).size, seen.length, "no id twice");
  for (const id of ids) assert.ok(seen.includes(id), `${id} is listed`);
  const { json: all } = await call<{ sessions: string[] }>(server.url, "GET", "/sessions?limit=1000", undefined, admin);
  assert.equal(all.sessions, seen);
  for (const bad of ["0", "1001", "x", "2.5"])
    assert.is((await call(server.url, "GET", `/sessions?limit=${bad}`, undefined, admin)).status, 400);
});

test("the listing is admin-only; x-tito-instance is on every response, refusals included", async () => {
  const { sessionToken } = await server.createSession("listed-by-admin");
  const asAgent = await call(server.url, "GET", "/sessions", undefined, { authorization: `Bearer ${sessionToken}` });
  assert.is(asAgent.status, 403);
  const responses = [
    asAgent,
    await call(server.url, "GET", "/health"),
    await call(server.url, "GET", "/sessions"),
    await call(server.url, "GET", "/no/such/route", undefined, admin),
    await call(server.url, "GET", "/sessions/nobody-here", undefined, admin),
    await call(server.url, "GET", "/sessions/listed-by-admin", undefined, admin),
  ];
  for (const res of responses) assert.is(res.headers.get("x-tito-instance"), instanceId, `status ${res.status}`);
});

test.run();
