// The records handoff (docs/architecture.md) through real processes: a records GET over
// HTTP/1.1 is written by the worker straight to the client's socket, byte for byte what the
// relay sends (an HTTP/1.0 GET is still relayed, so one server gives both), framed by
// content-length for records in memory and chunked for a journal stream, with
// `connection: close`. 404, auth, HEAD and keep-alive clients behave as before, and 200
// handed-off GETs leave no connection behind in the router or the host. Two servers hand
// off every body (`recordsHandoffMinBytes: 0`); a third, with the default, relays a body
// under 1 MiB on its keep-alive connection and hands off a bigger one.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { Agent, fetch as undiciFetch } from "undici";
import { startSessionServer, type SessionServer } from "../../index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { call, chat } from "../helpers/server.ts";
import { rawGet, type RawResponse } from "../helpers/raw-http.ts";
import { settle, tcpSockets } from "../helpers/proc-sockets.ts";

const ADMIN = "admin-token-for-handoff-tests";
const admin = { authorization: `Bearer ${ADMIN}` };
const R3_BYTES = 3 * 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), "tito-handoff-test-"));
let engine: SimEngine;
/** Records in memory (content-length), an admin token, no routing replay: small sessions. */
let memory: SessionServer;
/** Records from the journal (a chunked stream), routing replay: multi-MiB sessions. */
let journal: SessionServer;

test.before(async () => {
  engine = await startSimEngine({ routedExpertsBytes: R3_BYTES });
  const common = { engineUrl: engine.url, workers: 2, port: 0, logLevel: "warn", recordsHandoffMinBytes: 0 };
  memory = await startSessionServer({ ...common, durability: "memory", authToken: ADMIN });
  journal = await startSessionServer({ ...common, dataDir: join(dir, "data"), routingReplay: true });
});

test.after(async () => {
  await memory?.shutdown();
  await journal?.shutdown();
  await engine?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** One scrape of the router's /metrics: the value of each series named, by its labels. */
async function metric(server: SessionServer, name: string, labels: string): Promise<number> {
  const text = (await call(server.url, "GET", "/metrics", undefined, admin)).text;
  const line = text.split("\n").find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
}

/** The same records GET handed off (HTTP/1.1) and relayed (HTTP/1.0, never handed off). */
async function bothWays(server: SessionServer, id: string, headers: Record<string, string> = {}) {
  const handed = await rawGet(server.url, `/sessions/${id}`, "1.1", headers);
  const relayed = await rawGet(server.url, `/sessions/${id}`, "1.0", headers);
  return { handed, relayed };
}

function assertHandedOff(res: RawResponse, framing: "content-length" | "chunked"): void {
  assert.is(res.status, 200);
  assert.ok(res.complete, "the body's framing is whole");
  assert.is(res.headers["connection"], "close");
  assert.match(res.headers["x-tito-shard"] ?? "", /^[01]$/);
  assert.match(res.headers["x-tito-instance"] ?? "", /^[0-9a-f]{32}$/);
  assert.is(res.headers["content-type"], "application/json");
  if (framing === "chunked") {
    assert.ok(res.chunked, "a journal stream goes out chunked");
    assert.is(res.headers["content-length"], undefined);
  } else {
    assert.not.ok(res.chunked);
    assert.is(res.headers["content-length"], String(res.body.length));
  }
}

test("records in memory: the handed-off body is the relayed body, with content-length", async () => {
  const { sessionId: id, shard } = await memory.createSession();
  const turn = await call(memory.url, "POST", `/sessions/${id}/v1/chat/completions`, chatBody(), admin);
  assert.is(turn.status, 200, turn.text);
  const handoffs = await metric(memory, "tito_records_handoffs_total", `shard="${shard}"`);
  const relayedBytes = await metric(memory, "tito_relayed_reply_bytes_total", `shard="${shard}"`);
  const { handed, relayed } = await bothWays(memory, id, admin);
  assertHandedOff(handed, "content-length");
  assert.is(handed.headers["x-tito-shard"], String(shard));
  assert.is(relayed.status, 200);
  assert.is(relayed.headers["connection"], "close", "HTTP/1.0: Node closes after the relayed response");
  assert.ok(handed.body.equals(relayed.body), "byte for byte what the relay sends");
  const record = JSON.parse(handed.body.toString("utf8")) as { session_id: string; records: unknown[] };
  assert.is(record.session_id, id);
  assert.is(record.records.length, 1);
  assert.is(await metric(memory, "tito_records_handoffs_total", `shard="${shard}"`), handoffs + 1);
  assert.is(
    await metric(memory, "tito_relayed_reply_bytes_total", `shard="${shard}"`),
    relayedBytes + relayed.body.length,
    "only the HTTP/1.0 GET went through the router",
  );
  // The same body through an ordinary client.
  const fetched = await fetch(`${memory.url}/sessions/${id}`, { headers: admin });
  assert.is(fetched.status, 200);
  assert.ok(Buffer.from(await fetched.arrayBuffer()).equals(handed.body));
});

test("records from the journal: a multi-MiB R3 session streams chunked, identical to the relay", async () => {
  const { sessionId: id } = await journal.createSession();
  const messages: unknown[] = [{ role: "user", content: "Hello" }];
  for (let turn = 0; turn < 3; turn++) {
    const { res, message } = await chat(journal.url, id, messages);
    assert.is(res.status, 200, res.text);
    messages.push(message, { role: "user", content: `more ${turn}` });
  }
  const { handed, relayed } = await bothWays(journal, id);
  assertHandedOff(handed, "chunked");
  assert.ok(handed.body.length > 3 * R3_BYTES, `${handed.body.length} bytes hold three R3 payloads`);
  assert.ok(handed.body.equals(relayed.body), "byte for byte what the relay sends");
  assert.is(
    await metric(
      journal,
      "tito_worker_records_handoffs_total",
      `outcome="written",shard="${handed.headers["x-tito-shard"]}"`,
    ),
    1,
  );

  // A session without turns: the journal answers with two buffers, so content-length.
  const { sessionId: empty } = await journal.createSession();
  const none = await bothWays(journal, empty);
  assertHandedOff(none.handed, "content-length");
  assert.ok(none.handed.body.equals(none.relayed.body));
});

test("404, 401 and HEAD are answered by the router as before, never handed off", async () => {
  const { sessionId: id, shard } = await memory.createSession();
  const handoffs = () => metric(memory, "tito_records_handoffs_total", `shard="${shard}"`);
  const before = await handoffs();
  const unknown = await call(memory.url, "GET", "/sessions/no-such-session", undefined, admin);
  assert.is(unknown.status, 404);
  assert.equal(unknown.json, {
    error: "session not found: session_id=no-such-session",
    code: "TITO_ERR_SESSION_NOT_FOUND",
  });
  assert.is(unknown.headers.get("x-tito-shard") !== null, true);

  const anonymous = await call(memory.url, "GET", `/sessions/${id}`);
  assert.is(anonymous.status, 401);
  assert.equal(anonymous.json, { error: "missing or invalid bearer token", code: "TITO_ERR_UNAUTHORIZED" });

  const head = await fetch(`${memory.url}/sessions/${id}`, { method: "HEAD", headers: admin });
  assert.is(head.status, 200);
  assert.is(head.headers.get("x-tito-shard"), String(shard));
  assert.is(await handoffs(), before, "none of these went to a worker's socket");
});

test("a keep-alive client: GET records, then other requests on the same origin", async () => {
  const agent = new Agent({ connections: 1, pipelining: 1 });
  const get = (path: string, init: Parameters<typeof undiciFetch>[1] = {}) =>
    undiciFetch(`${memory.url}${path}`, { ...init, headers: { ...admin, ...init.headers }, dispatcher: agent });
  try {
    const { sessionId: id } = await memory.createSession();
    const messages: unknown[] = [{ role: "user", content: "Hello" }];
    for (let round = 0; round < 3; round++) {
      const records = await get(`/sessions/${id}`);
      assert.is(records.status, 200);
      assert.is(records.headers.get("connection"), "close");
      assert.is(((await records.json()) as { records: unknown[] }).records.length, round);
      const turn = await get(`/sessions/${id}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", messages }),
      });
      assert.is(turn.status, 200);
      const reply = (await turn.json()) as { choices: { message: unknown }[] };
      messages.push(reply.choices[0]!.message, { role: "user", content: `again ${round}` });
      const health = await get("/health");
      assert.is(health.status, 200);
      await health.arrayBuffer();
    }
  } finally {
    await agent.close();
  }
});

test("200 handed-off GETs in a row leave no connection open in the router or the host", async () => {
  const { sessionId: id, shard } = await memory.createSession();
  const turn = await call(memory.url, "POST", `/sessions/${id}/v1/chat/completions`, chatBody(), admin);
  assert.is(turn.status, 200);
  const router = memory.tree().router.pid!;
  const first = await rawGet(memory.url, `/sessions/${id}`, "1.1", admin);
  assertHandedOff(first, "content-length");
  const before = { router: tcpSockets(router), host: tcpSockets(process.pid) };
  const handoffs = await metric(memory, "tito_records_handoffs_total", `shard="${shard}"`);
  for (let i = 0; i < 200; i++) {
    const res = await rawGet(memory.url, `/sessions/${id}`, "1.1", admin);
    assert.is(res.status, 200);
    assert.ok(res.complete && res.body.equals(first.body), `GET ${i}: the whole body`);
  }
  assert.is(await metric(memory, "tito_records_handoffs_total", `shard="${shard}"`), handoffs + 200);
  assert.is(await metric(memory, "tito_inflight_requests", `shard="${shard}"`), 0);
  // The router closes its copy once the host has the socket: nothing accumulates.
  const after = await settle(() => ({ router: tcpSockets(router), host: tcpSockets(process.pid) }), before);
  assert.ok(after.router <= before.router, `router TCP sockets ${before.router} -> ${after.router}`);
  assert.ok(after.host <= before.host, `host TCP sockets ${before.host} -> ${after.host}`);
});

test("the default --records-handoff-min-bytes: a small body is relayed on the keep-alive connection, a big one handed off", async () => {
  const server = await startSessionServer({
    engineUrl: engine.url,
    workers: 1,
    port: 0,
    logLevel: "warn",
    durability: "memory",
    routingReplay: true,
  });
  const agent = new Agent({ connections: 1, pipelining: 1 });
  try {
    const { sessionId: id } = await server.createSession();
    const handoffs = () => metric(server, "tito_records_handoffs_total", `shard="0"`);
    const relayedBytes = () => metric(server, "tito_relayed_reply_bytes_total", `shard="0"`);
    const [handedBefore, relayedBefore] = [await handoffs(), await relayedBytes()];
    const small = await undiciFetch(`${server.url}/sessions/${id}`, { dispatcher: agent });
    assert.is(small.status, 200);
    assert.is(small.headers.get("connection"), "keep-alive", "relayed: the connection stays");
    const smallBody = Buffer.from(await small.arrayBuffer());
    assert.ok(smallBody.length < 1 << 20);
    assert.is(JSON.parse(smallBody.toString("utf8")).records.length, 0);
    assert.is(await handoffs(), handedBefore, "not handed off");
    assert.is(await relayedBytes(), relayedBefore + smallBody.length, "the router relayed its bytes");

    const { res } = await chat(server.url, id, [{ role: "user", content: "Hello" }]);
    assert.is(res.status, 200, res.text);
    const relayedBeforeBig = await relayedBytes();
    const big = await rawGet(server.url, `/sessions/${id}`, "1.1");
    assertHandedOff(big, "content-length");
    assert.ok(big.body.length > R3_BYTES, `${big.body.length} bytes: one R3 payload`);
    assert.is(await handoffs(), handedBefore + 1, "handed off");
    assert.is(await relayedBytes(), relayedBeforeBig, "the router copied none of it");
  } finally {
    await agent.close();
    await server.shutdown();
  }
});

function chatBody() {
  return { model: "m", messages: [{ role: "user", content: "Hello" }] };
}

test.run();
