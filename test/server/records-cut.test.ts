// A records GET cut by a process's death never looks complete (docs/http.md, "GET
// /sessions/{id}"), through real processes and an outside client (a raw socket that
// reads the first bytes, stops reading while the test kills, then reads to the end).
// Kill -9 of the worker, of its records streamer, and of the router, during a handed-off
// GET (HTTP/1.1) and a relayed one (HTTP/1.0, which has no chunked framing): each ends in
// an error at the HTTP level, or, where the killed process is not on the GET's path, a
// whole body; and a GET started afterwards is complete.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer, type SessionServerOptions } from "../../index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { waitGone } from "../helpers/events.ts";
import { recordsGet, recordsStreamerOf, type RecordsGet } from "../helpers/records-get.ts";
import { chat } from "../helpers/server.ts";

/** Four turns of this make a body several times the socket buffers: the writer is mid-body when killed. */
const R3_BYTES = 3 * 1024 * 1024;
const TURNS = 4;
const BOUND_MS = 20_000;
const dir = mkdtempSync(join(tmpdir(), "tito-records-cut-"));
let engine: SimEngine;
let server: SessionServer | undefined;

test.before(async () => {
  engine = await startSimEngine({ routedExpertsBytes: R3_BYTES });
});

test.after(async () => {
  await server?.shutdown();
  await engine?.close();
  rmSync(dir, { recursive: true, force: true });
});

let id = "";

/** A fresh one-worker server with routing replay and the journal, and a session of TURNS large turns. */
async function start(name: string, options: SessionServerOptions = {}): Promise<void> {
  await server?.shutdown();
  server = await startSessionServer({
    engineUrl: engine.url,
    workers: 1,
    port: 0,
    logLevel: "silent",
    routingReplay: true,
    restartBackoffMs: 50,
    dataDir: join(dir, name),
    ...options,
  });
  id = (await server.createSession()).sessionId;
  const messages: unknown[] = [{ role: "user", content: "Hello" }];
  for (let turn = 0; turn < TURNS; turn++) {
    const { res, message } = await chat(server.url, id, messages);
    assert.is(res.status, 200, res.text);
    messages.push(message, { role: "user", content: `more ${turn}` });
  }
}

const tree = () => server!.tree();

/**
 * The worker's records streamer, once it runs and is ready (tito_worker_records_streamer_up).
 * A records GET starts one (the worker writes that GET itself), so one is made first.
 */
async function streamerUp(): Promise<number> {
  const first = await recordsGet(server!.url, `/sessions/${id}`, { version: "1.1", boundMs: BOUND_MS });
  assert.is(first.outcome, "complete", `the GET that starts the streamer: ${first.why}`);
  const deadline = Date.now() + BOUND_MS;
  for (;;) {
    const worker = tree().shards[0]!.pid;
    const found = worker === null ? undefined : recordsStreamerOf(worker);
    if (found !== undefined && (await streamerReady())) return found;
    if (Date.now() > deadline) throw new Error("the worker has no records streamer ready");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function streamerReady(): Promise<boolean> {
  const text = await (await fetch(`${server!.url}/metrics`)).text();
  return text.split("\n").includes('tito_worker_records_streamer_up{shard="0"} 1');
}

/** Waits until the shard and the router run (again), other processes than `dead`. */
async function running(dead: number): Promise<void> {
  const deadline = Date.now() + BOUND_MS;
  for (;;) {
    const t = tree();
    const children = [t.router, ...t.shards];
    if (children.every((c) => c.state === "running" && c.pid !== null && c.pid !== dead)) return;
    if (Date.now() > deadline) throw new Error("the tree did not come back");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A GET during which `victim()` is SIGKILLed once the first bytes arrived; then a GET that must be whole. */
async function killDuring(version: "1.1" | "1.0", victim: () => Promise<number>): Promise<RecordsGet> {
  let killed = 0;
  const got = await recordsGet(server!.url, `/sessions/${id}`, {
    version,
    boundMs: BOUND_MS,
    midway: async () => {
      killed = await victim();
      process.kill(killed, "SIGKILL");
      assert.equal(await waitGone([killed], BOUND_MS), [], `process ${killed} is gone`);
    },
  });
  assert.ok(killed > 0);
  await running(killed);
  const after = await recordsGet(server!.url, `/sessions/${id}`, { version, boundMs: BOUND_MS });
  assert.is(after.outcome, "complete", `a GET after the kill: ${after.why}`);
  assert.is(after.json!.records.length, TURNS);
  assert.ok(after.bytes > TURNS * R3_BYTES);
  return got;
}

function assertErrored(got: RecordsGet, what: string): void {
  assert.is(got.outcome, "errored", `${what}: ${got.outcome} (${got.why}) after ${got.bytes} bytes`);
  assert.is(got.res?.status ?? 200, 200);
}

const worker = () => Promise.resolve(tree().shards[0]!.pid!);
const router = () => Promise.resolve(tree().router.pid!);

test("the worker killed while its streamer writes a handed-off GET: an error, then a whole GET", async () => {
  await start("streamer");
  await streamerUp();
  assertErrored(await killDuring("1.1", worker), "worker killed mid-body");
});

test("the records streamer killed mid-body: an error, then a whole GET", async () => {
  const pid = await streamerUp();
  assertErrored(await killDuring("1.1", () => Promise.resolve(pid)), "streamer killed mid-body");
});

test("the router killed during a handed-off GET: not on its path, the body is whole", async () => {
  await streamerUp();
  const got = await killDuring("1.1", router);
  assert.is(got.outcome, "complete", `${got.why}`);
  assert.is(got.json!.records.length, TURNS);
  assert.is(got.res!.trailers["x-tito-body-bytes"], String(got.res!.body.length), "the trailers were checked");
});

test("the router killed while it relays a GET (HTTP/1.0): an error, never a clean close", async () => {
  assertErrored(await killDuring("1.0", router), "router killed mid-relay");
});

test("the worker killed while the router relays its GET (HTTP/1.0): an error, never a clean close", async () => {
  assertErrored(await killDuring("1.0", worker), "worker killed mid-relay");
});

test("the worker killed while it writes a handed-off GET itself (no streamer): an error, then a whole GET", async () => {
  await start("no-streamer", { recordsStreamer: false });
  assertErrored(await killDuring("1.1", worker), "worker killed mid-body");
});

test.run();
