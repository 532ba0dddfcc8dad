// A records handoff whose worker dies, through the real CLI (its host is another process,
// so the test can stop it): killed between its reply and the handoff, the client gets the
// router's 503 from the host or a closed connection; killed with the GET in flight, the
// router's own 503, which ends the GET though the connection stays open; killed midway
// through the body, the client gets a visibly cut-short response. Never a hang; the shard comes back, and at the
// end no process is left. Records in memory, with multi-MiB routing-replay payloads.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { connect } from "node:net";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { startCli, type CliRun } from "../helpers/cli.ts";
import type { SupervisionBody } from "../helpers/bodies.ts";
import { waitGone } from "../helpers/events.ts";
import { call, chat } from "../helpers/server.ts";
import { parseResponse, rawGet, type RawResponse } from "../helpers/raw-http.ts";
import { recordsGet } from "../helpers/records-get.ts";

const R3_BYTES = 4 * 1024 * 1024;
/** How long a client may wait on a dead worker's GET: a safety net that fails the test. */
const BOUND_MS = 15_000;
let engine: SimEngine;
let run: CliRun;
/** Every child process pid seen, for the orphan check. */
const pids = new Set<number>();

test.before(async () => {
  engine = await startSimEngine({ routedExpertsBytes: R3_BYTES });
  run = await startCli([
    ...["--port", "0", "--workers", "1", "--engine", engine.url, "--durability", "memory"],
    ...["--routing-replay", "--max-restarts", "10", "--log-level", "warn"],
  ]);
});

test.after(async () => {
  if (run.proc.exitCode === null) {
    run.proc.kill("SIGCONT");
    run.proc.kill("SIGTERM");
    await run.exit;
  }
  await engine?.close();
});

async function tree(): Promise<SupervisionBody> {
  const body = (await call<SupervisionBody>(run.url, "GET", "/supervision")).json;
  for (const child of [body.router, ...body.shards]) if (child.pid) pids.add(child.pid);
  return body;
}

/** The router's counter or gauge `name` for shard 0, from /metrics. */
async function metric(name: string): Promise<number> {
  const text = (await call(run.url, "GET", "/metrics")).text;
  const line = text.split("\n").find((l) => l.startsWith(`${name}{shard="0"}`));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
}

const handoffs = () => metric("tito_records_handoffs_total");

/** Polls `check` every 20 ms until it holds; fails after `ms`. */
async function until(what: string, check: () => Promise<boolean>, ms = BOUND_MS): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Rejects if `promise` has not settled within BOUND_MS: a hang fails the test. */
function bounded<T>(what: string, promise: Promise<T>): Promise<T> {
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} hung`)), BOUND_MS).unref()),
  ]);
}

/** A session of `turns` turns, each with an R3 payload of R3_BYTES. */
async function largeSession(turns: number): Promise<string> {
  const id = ((await call<{ session_id: string }>(run.url, "POST", "/sessions")).json as { session_id: string })
    .session_id;
  const messages: unknown[] = [{ role: "user", content: "Hello" }];
  for (let turn = 0; turn < turns; turn++) {
    const { res, message } = await chat(run.url, id, messages);
    assert.is(res.status, 200, res.text);
    messages.push(message, { role: "user", content: `more ${turn}` });
  }
  return id;
}

/** Waits until shard 0 runs a process other than `dead`, then checks a records GET works. */
async function recovered(dead: number): Promise<void> {
  await until("the shard restarted", async () => {
    const shard = (await tree()).shards[0]!;
    return shard.state === "running" && shard.pid !== null && shard.pid !== dead;
  });
  const id = await largeSession(1);
  const res = await rawGet(run.url, `/sessions/${id}`);
  assert.is(res.status, 200);
  assert.ok(res.complete);
  assert.is(res.headers["connection"], "close");
}

test("a multi-MiB session in memory is handed off with content-length, identical to the relay", async () => {
  await tree();
  const id = await largeSession(2);
  const handed = await rawGet(run.url, `/sessions/${id}`);
  const relayed = await rawGet(run.url, `/sessions/${id}`, "1.0");
  assert.is(handed.status, 200);
  assert.ok(handed.complete);
  assert.is(handed.headers["content-length"], String(handed.body.length));
  assert.is(handed.headers["connection"], "close");
  assert.ok(handed.body.length > 2 * R3_BYTES);
  assert.ok(handed.body.equals(relayed.body), "byte for byte what the relay sends");
});

test("the worker killed between its reply and the handoff: a 503 or a closed connection, then recovery", async () => {
  const id = await largeSession(1);
  const worker = (await tree()).shards[0]!.pid!;
  const host = run.proc.pid!;
  const before = await handoffs();
  // With the host stopped, the router's handoff waits in the IPC pipe; the worker dies meanwhile.
  process.kill(host, "SIGSTOP");
  let outcome: Promise<RawResponse | Error>;
  try {
    outcome = rawGet(run.url, `/sessions/${id}`).catch((err: Error) => err);
    await until("the router handed the socket to the host", async () => (await handoffs()) > before);
    process.kill(worker, "SIGKILL");
  } finally {
    process.kill(host, "SIGCONT");
  }
  const res = await bounded("the GET of a worker killed before the handoff", outcome);
  if (res instanceof Error) {
    // The host took the socket before it learnt of the exit: the send failed and closed it.
    assert.match(res.message, /no response head|ECONNRESET|socket hang up/);
  } else {
    assert.is(res.status, 503);
    assert.equal(JSON.parse(res.body.toString()), {
      error: "session worker unavailable",
      code: "TITO_ERR_WORKER_UNAVAILABLE",
    });
    assert.is(res.headers["connection"], "close");
    assert.is(res.headers["x-tito-shard"], "0");
  }
  await recovered(worker);
});

// The chaos test's records GETs once hung here (test/server/chaos.test.ts): the router's own
// 503 keeps an HTTP/1.1 connection alive, whole by its content-length, and a client that
// judged a response only at the connection's close waited out the 72 s keep-alive.
test("the worker killed with the GET in flight: the router's 503, whole on a kept-alive connection, ends the GET", async () => {
  const id = await largeSession(1);
  const worker = (await tree()).shards[0]!.pid!;
  // Stopped, the worker never answers the get op the router sends it; killed, its channel closes under the request.
  process.kill(worker, "SIGSTOP");
  let got: ReturnType<typeof recordsGet>;
  try {
    got = recordsGet(run.url, `/sessions/${id}`, { boundMs: BOUND_MS });
    await until("the router relays the GET", async () => (await metric("tito_inflight_requests")) > 0);
  } finally {
    process.kill(worker, "SIGKILL");
  }
  const res = await got;
  assert.is(res.outcome, "errored");
  assert.is(res.why, "status 503");
  assert.equal(JSON.parse(res.res!.body.toString()), {
    error: "session worker unavailable",
    code: "TITO_ERR_WORKER_UNAVAILABLE",
  });
  assert.is(res.res!.headers["connection"], "keep-alive", "the router's own error leaves the connection open");
  await recovered(worker);
});

test("the worker killed midway through the body: the client sees it cut short, then recovery", async () => {
  const id = await largeSession(3);
  const worker = (await tree()).shards[0]!.pid!;
  const { hostname, port } = new URL(run.url);
  const parts: Buffer[] = [];
  const closed = new Promise<void>((resolve) => {
    const socket = connect(Number(port), hostname, () =>
      socket.write(`GET /sessions/${id} HTTP/1.1\r\nhost: x\r\n\r\n`),
    );
    socket.once("data", (first: Buffer) => {
      parts.push(first);
      // Stop reading: the worker fills the socket's buffers and waits for them to drain.
      socket.pause();
      process.kill(worker, "SIGKILL");
      socket.on("data", (d: Buffer) => parts.push(d));
      socket.resume();
    });
    socket.on("error", () => undefined);
    socket.on("close", () => resolve());
  });
  await bounded("the GET of a worker killed midway", closed);
  const res = parseResponse(Buffer.concat(parts));
  assert.is(res.status, 200);
  const length = Number(res.headers["content-length"]);
  assert.ok(length > 3 * R3_BYTES);
  assert.is(res.complete, false, "fewer bytes than content-length: visibly cut short");
  assert.ok(res.body.length < length);
  await recovered(worker);
});

test("shutdown leaves no process behind", async () => {
  await tree();
  run.proc.kill("SIGTERM");
  const { code } = await run.exit;
  assert.is(code, 0);
  assert.equal(await waitGone([...pids], 10_000), [], "every router and worker process is gone");
});

test.run();
