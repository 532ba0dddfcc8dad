// The records streamer (docs/architecture.md) through real processes: a records GET read
// from the journal is written by the worker's own helper process, started by the first GET
// that needs it (which waits for it) and stopped once idle, every thread at the nice value
// of --records-nice, byte for byte what the relay sends. Killed
// midway, the client sees a cut response and a new streamer starts while the worker lives
// on; dead three times in a row, the worker writes bodies itself. It never outlives its
// worker, and a shutdown leaves none behind. A client that leaves midway gets its response
// settled as cut, by the streamer or the worker, and nothing of it stays open or pinned.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer, type SessionServerOptions } from "../../index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { waitGone } from "../helpers/events.ts";
import { parseResponse, rawGet, type RawResponse } from "../helpers/raw-http.ts";
import { call, chat } from "../helpers/server.ts";

const R3_BYTES = 3 * 1024 * 1024;
const BOUND_MS = 15_000;
const dir = mkdtempSync(join(tmpdir(), "tito-streamer-test-"));
let engine: SimEngine;
let server: SessionServer;
/** Every streamer pid seen, for the check that none is left. */
const streamers = new Set<number>();

test.before(async () => {
  engine = await startSimEngine({ routedExpertsBytes: R3_BYTES });
});

test.after(async () => {
  await server?.shutdown();
  await engine?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The running server's journal name and options, for start(). */
let serving: string | undefined;
/** The counters' values when the running test began (metric() answers from there on). */
const zero = new Map<string, number>();

/**
 * A one-worker server with routing replay, its journal in `name` (or none, with records in
 * memory): the running one if it has that name and those options (the tests that share it
 * are ordered so what each asserts about the streamer holds from where the last one left
 * it), else a new one. Counters count from here on, for the test that called it.
 */
async function start(name: string, options: SessionServerOptions = {}): Promise<void> {
  const config = JSON.stringify([name, options]);
  if (serving !== config) await fresh(name, options);
  serving = config;
  zero.clear();
  for (const line of (await call(server.url, "GET", "/metrics")).text.split("\n"))
    if (line.startsWith("tito_worker_") && /^\w+_total\{/.test(line))
      zero.set(line.slice(0, line.lastIndexOf(" ")), Number(line.slice(line.lastIndexOf(" ") + 1)));
}

async function fresh(name: string, options: SessionServerOptions): Promise<void> {
  await server?.shutdown();
  server = await startSessionServer({
    engineUrl: engine.url,
    workers: 1,
    port: 0,
    logLevel: "silent",
    routingReplay: true,
    ...(options.durability === "memory" ? {} : { dataDir: join(dir, name) }),
    ...options,
  });
}

/** Fields of /proc/<pid>/stat (or of a thread's, "<pid>/task/<tid>") after the command name; undefined once gone. */
function stat(pid: number | string): string[] | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "latin1");
    return text.slice(text.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

/**
 * The records streamers among the processes whose parent is `pid` (field 4 of every
 * /proc/<n>/stat): a worker run from source through tsx may also have esbuild's.
 */
function childrenOf(pid: number): number[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((n) => stat(n)?.[1] === String(pid) && cmdline(n).includes("records-streamer-main"));
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "latin1");
  } catch {
    return "";
  }
}

const workerPid = () => server.tree().shards[0]!.pid!;

/** The worker's streamer, once it runs and is ready (tito_worker_records_streamer_up). */
async function streamerUp(): Promise<number> {
  const deadline = Date.now() + BOUND_MS;
  for (;;) {
    const children = childrenOf(workerPid());
    assert.ok(children.length <= 1, `one streamer at most, got ${children.join(", ")}`);
    if (children.length === 1 && (await metric("tito_worker_records_streamer_up")) === 1) {
      streamers.add(children[0]!);
      return children[0]!;
    }
    if (Date.now() > deadline) throw new Error("the worker has no streamer ready");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A gauge's value, or a counter's count since the test's start(). */
async function metric(name: string, labels = 'shard="0"'): Promise<number> {
  const text = (await call(server.url, "GET", "/metrics")).text;
  const line = text.split("\n").find((l) => l.startsWith(`${name}{${labels}}`));
  return (
    (line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1))) - (zero.get(`${name}{${labels}}`) ?? 0)
  );
}

/** The server the first four tests share: at --records-nice 7 (the default options otherwise). */
const SHARED = ["shared", { recordsNice: 7 }] as const;

async function session(turns: number): Promise<string> {
  const { sessionId } = await server.createSession();
  const messages: unknown[] = [{ role: "user", content: "Hello" }];
  for (let turn = 0; turn < turns; turn++) {
    const { res, message } = await chat(server.url, sessionId, messages);
    assert.is(res.status, 200, res.text);
    messages.push(message, { role: "user", content: `more ${turn}` });
  }
  return sessionId;
}

/** A handed-off GET (HTTP/1.1) that must be whole and equal to the relayed one (HTTP/1.0). */
async function getWhole(id: string): Promise<void> {
  const handed = await rawGet(server.url, `/sessions/${id}`, "1.1");
  const relayed = await rawGet(server.url, `/sessions/${id}`, "1.0");
  assert.is(handed.status, 200);
  assert.ok(handed.complete, "the chunked body is whole");
  assert.ok(handed.chunked);
  assert.is(handed.headers["connection"], "close");
  assert.is(handed.headers["x-tito-shard"], "0");
  assert.ok(handed.body.length > R3_BYTES);
  assert.ok(handed.body.equals(relayed.body), "byte for byte what the relay sends");
}

async function killAndWait(pid: number): Promise<void> {
  process.kill(pid, "SIGKILL");
  assert.equal(await waitGone([pid], BOUND_MS), [], `process ${pid} is gone`);
}

test("a journal-backed records GET is written by the worker's streamer, every thread at --records-nice", async () => {
  await start(...SHARED);
  const id = await session(2);
  assert.equal(childrenOf(workerPid()), [], "no streamer before a records GET needs one");
  assert.is(await metric("tito_worker_records_streamer_starts_total"), 0);
  await getWhole(id); // starts the streamer, and waits for it
  assert.is(await metric("tito_worker_records_streamed_total"), 1, "the first GET is the streamer's, not the worker's");
  const pid = await streamerUp();
  await getWhole(id);
  assert.is(stat(pid)![16], "7", "the streamer runs at nice 7 (field 19 of /proc/<pid>/stat)");
  // Node's threads started before the streamer's code ran (libuv's pool, which reads the
  // journal files, among them) are lowered too: nice is per thread on Linux.
  const threads = readdirSync(`/proc/${pid}/task`);
  assert.ok(threads.length > 1, `the streamer has Node's threads, got ${threads.length}`);
  for (const tid of threads)
    assert.is(stat(`${pid}/task/${tid}`)?.[16], "7", `thread ${tid} of the streamer at nice 7`);
  assert.is(stat(workerPid())![16], "0", "the worker keeps its own priority");
  await getWhole(id);
  assert.is(await streamerUp(), pid, "one streamer serves GET after GET");
  assert.is(await metric("tito_worker_records_streamer_starts_total"), 1);
  assert.is(await metric("tito_worker_records_handoffs_total", 'outcome="written",shard="0"'), 3);
  assert.is(await metric("tito_worker_records_streamed_total"), 3);
  assert.ok((await metric("tito_worker_handoff_bytes_total")) > 4 * R3_BYTES, "the streamer's bytes are counted");
});

/**
 * A records GET whose streamer is SIGKILLed once the first bytes arrived (the client reads
 * no more meanwhile, so the body is still being written): resolves with the response as
 * the client got it and the streamer's pid.
 */
async function cutGet(id: string): Promise<{ cut: RawResponse; streamer: number }> {
  const { hostname, port } = new URL(server.url);
  const parts: Buffer[] = [];
  let streamer = 0;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the GET of a killed streamer hung")), BOUND_MS);
    const socket = connect(Number(port), hostname, () =>
      socket.write(`GET /sessions/${id} HTTP/1.1\r\nhost: x\r\n\r\n`),
    );
    socket.once("data", (data: Buffer) => {
      parts.push(data);
      socket.pause(); // the streamer fills the socket's buffers and waits for them to drain
      [streamer] = childrenOf(workerPid());
      streamers.add(streamer!);
      process.kill(streamer!, "SIGKILL");
      socket.on("data", (more: Buffer) => parts.push(more));
      socket.resume();
    });
    socket.on("error", () => undefined);
    socket.on("close", () => {
      clearTimeout(timer);
      resolve();
    });
  });
  assert.equal(await waitGone([streamer], BOUND_MS), []);
  return { cut: parseResponse(Buffer.concat(parts)), streamer };
}

test("the streamer killed midway: the client sees the body cut short; a new streamer starts", async () => {
  await start(...SHARED); // its streamer up, from the test before
  const id = await session(4);
  await getWhole(id);
  const first = await streamerUp();
  const worker = workerPid();
  const { cut, streamer } = await cutGet(id);
  assert.is(streamer, first);
  assert.is(cut.status, 200);
  assert.is(cut.complete, false, "no last chunk: visibly cut short");
  assert.ok(cut.body.length < 4 * R3_BYTES);
  assert.is(workerPid(), worker, "the worker lives on");
  assert.is(await metric("tito_worker_records_handoffs_total", 'outcome="cut",shard="0"'), 1);
  await getWhole(id); // by the worker or the new streamer, whichever is ready: whole either way
  const second = await streamerUp();
  assert.is.not(second, first);
  await getWhole(id);
  assert.is(await metric("tito_worker_records_streamer_starts_total"), 1, "one start: the killed one's successor");
  assert.is(await metric("tito_worker_records_handoffs_total", 'outcome="written",shard="0"'), 3);
  assert.is(workerPid(), worker);
});

/** GETs the client leaves midway, `rounds` times: each must be settled as cut (its segments unpinned). */
async function leaveMidway(id: string, rounds: number): Promise<void> {
  const { hostname, port } = new URL(server.url);
  for (let round = 1; round <= rounds; round++) {
    await new Promise<void>((resolve) => {
      const socket = connect(Number(port), hostname, () =>
        socket.write(`GET /sessions/${id} HTTP/1.1\r\nhost: x\r\n\r\n`),
      );
      // Not reading on: the writer's socket backs up, then the client goes away.
      socket.once("data", () => {
        socket.pause();
        setTimeout(() => socket.destroy(), 50);
      });
      socket.on("error", () => undefined);
      socket.on("close", () => resolve());
    });
    const deadline = Date.now() + BOUND_MS;
    while ((await metric("tito_worker_records_handoffs_total", 'outcome="cut",shard="0"')) < round) {
      assert.ok(Date.now() < deadline, `the response the client left (round ${round}) is never settled`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

test("the client leaves midway: the streamer settles the response as cut and streams on", async () => {
  await start(...SHARED);
  const id = await session(4);
  await getWhole(id);
  const pid = await streamerUp();
  await leaveMidway(id, 3);
  await getWhole(id);
  assert.is(await streamerUp(), pid, "the same streamer, alive");
  assert.is(await metric("tito_worker_records_handoffs_total", 'outcome="written",shard="0"'), 2);
});

test("a streamer dead three times in a row: the worker writes records itself", async () => {
  await start(...SHARED); // its streamer up, from the test before, and no death since a response finished
  const id = await session(4);
  await getWhole(id);
  for (let death = 1; death <= 3; death++) {
    await streamerUp();
    assert.is((await cutGet(id)).cut.complete, false);
  }
  await new Promise((resolve) => setTimeout(resolve, 1_000)); // four restart delays
  assert.equal(childrenOf(workerPid()), [], "no fourth streamer");
  // The first of the three dead ones was running when the test began.
  assert.is(await metric("tito_worker_records_streamer_starts_total"), 2);
  assert.is(await metric("tito_worker_records_streamer_up"), 0);
  await getWhole(id);
  await getWhole(id);
  assert.is(await metric("tito_worker_records_handoffs_total", 'outcome="written",shard="0"'), 3);
  assert.is(await metric("tito_worker_records_handoffs_total", 'outcome="cut",shard="0"'), 3);
  assert.is(await metric("tito_worker_records_streamed_total"), 4, "the last two are the worker's");
});

test("an idle streamer exits after recordsIdleMs; the next records GET starts another", async () => {
  await start("idle", { recordsIdleMs: 1_000 });
  const id = await session(2);
  // The GET starts the streamer, which writes it: seen while it does, before it idles out.
  const [, first] = await Promise.all([getWhole(id), streamerUp()]);
  assert.equal(await waitGone([first], BOUND_MS), [], "the idle streamer exits");
  assert.equal(childrenOf(workerPid()), [], "and no other starts by itself");
  assert.is(await metric("tito_worker_records_streamer_up"), 0);
  assert.is(await metric("tito_worker_records_streamer_starts_total"), 1);
  const [, second] = await Promise.all([getWhole(id), streamerUp()]);
  assert.is.not(second, first);
  assert.is(await metric("tito_worker_records_streamer_starts_total"), 2);
  assert.is(await metric("tito_worker_records_handoffs_total", 'outcome="written",shard="0"'), 2);
  assert.is(await metric("tito_worker_records_handoffs_total", 'outcome="cut",shard="0"'), 0);
  assert.is(await metric("tito_worker_records_streamed_total"), 2, "each the streamer's, the one after idle too");
});

test("records in memory, or recordsStreamer: false: no streamer, the worker writes records", async () => {
  for (const options of [{ durability: "memory" }, { recordsStreamer: false }] as const) {
    await start(options.durability === "memory" ? "off" : "no-streamer", options);
    const id = await session(2);
    const res = await rawGet(server.url, `/sessions/${id}`, "1.1");
    assert.is(res.status, 200);
    assert.ok(res.complete);
    assert.ok(res.body.length > 2 * R3_BYTES);
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(childrenOf(workerPid()), [], JSON.stringify(options));
    assert.is(await metric("tito_worker_records_streamer_starts_total"), 0);
    assert.is(await metric("tito_worker_records_streamer_up"), 0);
    assert.is(await metric("tito_worker_records_handoffs_total", 'outcome="written",shard="0"'), 1);
    assert.is(await metric("tito_worker_records_streamed_total"), 0);
  }
});

test("the client leaves midway with no streamer: the worker settles the response as cut", async () => {
  await start("no-streamer", { recordsStreamer: false }); // the server the test before left
  const id = await session(4);
  await leaveMidway(id, 3);
  await getWhole(id);
  assert.is(await metric("tito_worker_records_handoffs_total", 'outcome="written",shard="0"'), 1);
});

test("the worker killed: its streamer exits too; a shutdown leaves no streamer behind", async () => {
  await start("orphans");
  const id = await session(1);
  await getWhole(id);
  const streamer = await streamerUp();
  await killAndWait(workerPid());
  assert.equal(await waitGone([streamer], 5_000), [], "the streamer does not outlive its worker");
  const deadline = Date.now() + BOUND_MS;
  while (server.tree().shards[0]!.state !== "running") {
    assert.ok(Date.now() < deadline, "the shard came back");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await getWhole(id); // the journal brought the session back
  await streamerUp();
  await server.shutdown();
  assert.equal(await waitGone([...streamers], 10_000), [], "every streamer is gone");
});

test.run();
