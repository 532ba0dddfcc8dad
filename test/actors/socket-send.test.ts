// A socket sent to a child (sendSocketToChild, actors/child-process.ts) is the child's only
// once its runtime says it took it. A child killed a moment before the send, whose death
// this process has not read yet, still takes writes on its channel, and Node reports them
// as sent; the socket must come back "refused", untouched, so that the sender answers on
// it (the host's 503 for a records GET whose worker died: server/host/records-handoff.ts).
// Real child processes (test/fixtures/child-echo.ts answers a socket with "taken by <pid>").
import { readFileSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { fileURLToPath } from "node:url";
import type { ChildProcess } from "node:child_process";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { sendSocketToChild, spawnChild, type SocketSent } from "../../actors/child-process.ts";

const entry = fileURLToPath(new URL("../fixtures/child-echo.ts", import.meta.url));
let server: Server;
let port = 0;
const sockets: Socket[] = [];
const children: ChildProcess[] = [];

test.before(async () => {
  server = createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as { port: number }).port;
});

test.after(() => {
  for (const socket of sockets) socket.destroy();
  for (const child of children) child.kill("SIGKILL");
  server.close(); // not awaited: a socket once sent to a child keeps the count of connections up
});

async function startChild(name: string): Promise<ChildProcess> {
  const child = spawnChild({ name, entry, config: {} }, 1);
  children.push(child);
  await new Promise<void>((resolve) =>
    child.on("message", (m: { type?: string }) => {
      if (m?.type === "ready") resolve();
    }),
  );
  return child;
}

/** The client's end and the accepted end of one connection. */
async function pair(): Promise<{ client: Socket; socket: Socket }> {
  const before = sockets.length;
  const client = connect(port, "127.0.0.1");
  sockets.push(client);
  await new Promise((resolve) => client.once("connect", resolve));
  while (sockets.length === before + 1) await new Promise((resolve) => setTimeout(resolve, 5));
  return { client, socket: sockets[sockets.length - 1]! };
}

function readAll(client: Socket): Promise<string> {
  const chunks: Buffer[] = [];
  client.on("data", (chunk: Buffer) => chunks.push(chunk));
  return new Promise((resolve) => client.once("close", () => resolve(Buffer.concat(chunks).toString("latin1"))));
}

const send = (child: ChildProcess, socket: Socket) =>
  new Promise<SocketSent>((resolve) => sendSocketToChild(child, { type: "test-socket" }, socket, resolve));

test("a live child takes the socket: sent, and it answers on it", async () => {
  const child = await startChild("taker");
  const { client, socket } = await pair();
  const text = readAll(client);
  assert.is(await send(child, socket), "sent");
  socket.destroy(); // ours; the child has its own copy
  assert.is(await text, `taken by ${child.pid}\n`);
});

test("a child dead before the send, not yet seen dead: refused, the socket still ours", async () => {
  const child = await startChild("dead");
  const { client, socket } = await pair();
  const text = readAll(client);
  child.kill("SIGKILL");
  // Keep this loop busy until the kernel has the child as a zombie: its exit is read only after the send.
  const deadline = Date.now() + 10_000;
  for (;;) {
    const stat = readFileSync(`/proc/${child.pid}/stat`, "latin1");
    if (stat[stat.lastIndexOf(")") + 2] === "Z") break;
    if (Date.now() > deadline) throw new Error("the child did not die");
  }
  assert.is(await send(child, socket), "refused");
  assert.not.ok(socket.destroyed, "nobody closed it");
  socket.end("answered by the sender\n");
  assert.is(await text, "answered by the sender\n");
});

test("a child whose channel is closed: refused at once", async () => {
  const child = await startChild("gone");
  child.kill("SIGKILL");
  await new Promise((resolve) => child.once("close", resolve));
  const { socket } = await pair();
  assert.is(await send(child, socket), "refused");
  assert.not.ok(socket.destroyed);
  socket.destroy();
});

test.run();
