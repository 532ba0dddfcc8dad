// The records streamer killed a moment before a response is sent to it, before the worker
// has seen it die (issue 44's CI run: "a GET after the kill: no response head in 0
// bytes"). Node reports a write to the channel of a child that just died as a success, so
// the worker must not take the send for the streamer's: until the streamer's runtime says
// it took the socket (handle-taken, actors/child-process.ts), the socket is the worker's,
// and RecordsStreamer.write hands it back untouched so the worker writes the body itself.
// Real streamer processes; the race is made certain by keeping this event loop busy until the kernel reports the
// streamer dead, so its exit is read only after the send.
import { readFileSync } from "node:fs";
import { createServer, connect, type Server, type Socket } from "node:net";
import pino from "pino";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { RecordsStreamer } from "../../server/worker/records-streamer.ts";
import { WorkerMetrics } from "../../server/worker/worker-metrics.ts";

let server: Server;
let port = 0;
const accepted: Socket[] = [];
const clients: Socket[] = [];
let keepAlive: NodeJS.Timeout;

test.before(async () => {
  // The streamer's child and channel do not hold a worker's event loop open; this test's must be.
  keepAlive = setInterval(() => {}, 1_000);
  server = createServer((socket) => accepted.push(socket));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as { port: number }).port;
});

test.after(() => {
  for (const socket of [...accepted, ...clients]) socket.destroy();
  // Not awaited: a socket once sent to a child keeps the server's count of connections up.
  server.close();
  clearInterval(keepAlive);
});

/** A connected pair: the client's end, and the server's end a worker would hand over. */
async function pair(): Promise<{ client: Socket; socket: Socket }> {
  const before = accepted.length;
  const client = connect(port, "127.0.0.1");
  clients.push(client);
  await new Promise((resolve) => client.once("connect", resolve));
  while (accepted.length === before) await new Promise((resolve) => setTimeout(resolve, 5));
  return { client, socket: accepted[accepted.length - 1]! };
}

/** Everything the client reads until its end closes. */
function readAll(client: Socket): Promise<string> {
  const chunks: Buffer[] = [];
  client.on("data", (chunk: Buffer) => chunks.push(chunk));
  return new Promise((resolve) => client.once("close", () => resolve(Buffer.concat(chunks).toString("latin1"))));
}

/** Blocks this event loop until `pid` is a zombie: dead, and not yet reaped by us. */
function blockUntilDead(pid: number): void {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const text = readFileSync(`/proc/${pid}/stat`, "latin1");
    if (text[text.lastIndexOf(")") + 2] === "Z") return;
    if (Date.now() > deadline) throw new Error(`process ${pid} did not die`);
  }
}

function newStreamer(metrics: WorkerMetrics): RecordsStreamer {
  return new RecordsStreamer({ shard: 0, nice: 0, logger: pino({ level: "silent" }), metrics, idleMs: 60_000 });
}

const HEAD = { "content-type": "text/plain" };

test("a response sent to a streamer that just died comes back to the worker, untouched", async () => {
  const metrics = new WorkerMetrics(0, () => 0);
  const streamer = newStreamer(metrics);
  try {
    // A first response starts the streamer and is written whole by it.
    const first = await pair();
    const firstText = readAll(first.client);
    assert.is(await streamer.write(first.socket, 200, [HEAD], [Buffer.from("first body")]), true);
    assert.match(await firstText, /^HTTP\/1.1 200 OK\r\n[^]*\r\nfirst body\r\n0\r\n/);
    const pid = streamer.pid!;
    assert.ok(pid > 0);

    const second = await pair();
    process.kill(pid, "SIGKILL");
    blockUntilDead(pid);
    const outcome = await streamer.write(second.socket, 200, [HEAD], [Buffer.from("second body")]);
    assert.is(outcome, undefined, "the streamer never took the socket: it is the worker's again");
    assert.not.ok(second.socket.destroyed, "the worker's socket is still open for it to write");
    second.socket.end("written by the worker");
    assert.is(await readAll(second.client), "written by the worker");
  } finally {
    await streamer.close();
  }
});

test("a streamer killed after it took the socket: the response is cut, never handed back", async () => {
  const metrics = new WorkerMetrics(0, () => 0);
  const streamer = newStreamer(metrics);
  try {
    const warm = await pair();
    assert.is(await streamer.write(warm.socket, 200, [HEAD], [Buffer.from("warm")]), true);
    warm.client.destroy();
    const pid = streamer.pid!;
    // A body larger than the socket buffers, of which the client reads the first bytes
    // and then no more: the streamer has taken the socket and is mid-body when killed.
    const { client, socket } = await pair();
    const big = Buffer.alloc(16 * 1024 * 1024, 0x61);
    const firstBytes = new Promise((resolve) => client.once("data", resolve));
    const pending = streamer.write(socket, 200, [HEAD], [big]);
    await firstBytes;
    client.pause();
    process.kill(pid, "SIGKILL");
    assert.is(await pending, false, "cut by the streamer's death");
    assert.ok(socket.destroyed, "the worker's copy is closed");
    client.destroy();
  } finally {
    await streamer.close();
  }
});

test.run();
