// The host's part of the records handoff (server/host/records-handoff.ts) with fixture
// children and real IPC: the "router" fixture hands a TCP connection to the host, which
// passes it to the running process of the named shard and epoch, or, when there is none
// (no such shard, an old or future epoch, a worker that just died), answers the router's
// 503 itself. Nothing of it reaches an actor's mailbox, and the host keeps no socket.
import { fileURLToPath } from "node:url";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { SupervisionTree } from "../../actors/index.ts";
import { forwardRecordsHandoff } from "../../server/host/records-handoff.ts";
import { waitForEvent } from "../helpers/events.ts";
import { parseResponse } from "../helpers/raw-http.ts";
import { settle, tcpSockets } from "../helpers/proc-sockets.ts";
import { connect } from "node:net";
import { TS_LOADER_URL } from "../helpers/ts-loader.ts";

const entry = fileURLToPath(new URL("../fixtures/child-echo.ts", import.meta.url));
/** The fixture runs through the test run's own TypeScript loader, not tsx's (~0.15 CPU s less per start). */
const tsLoader = TS_LOADER_URL;
let tree: SupervisionTree;
let port = 0;

test.before(async () => {
  tree = new SupervisionTree({
    instanceId: "0".repeat(32),
    router: { name: "router", entry, tsLoader, config: { handoffs: true } },
    shards: [{ name: "shard-0", entry, tsLoader, config: {} }],
    restart: { maxRestarts: 5, baseBackoffMs: 50, maxBackoffMs: 200 },
    graceMs: 2_000,
    onHandle: (from, message, handle) => forwardRecordsHandoff(tree, from, message, handle),
  });
  await tree.whenRunning();
  port = Number(tree.events().find((e) => e.actor === "router" && e.kind === "ready")!.detail.port);
});

test.after(async () => {
  await tree?.shutdown();
});

/** Sends `GET /<shard>/<epoch>` through the fixture router; resolves with all the client read. */
function handOff(shard: number, epoch: number | "current"): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(`GET /${shard}/${epoch} HTTP/1.1\r\n\r\n`));
    const parts: Buffer[] = [];
    socket.on("data", (d: Buffer) => parts.push(d));
    socket.on("error", reject);
    socket.on("close", () => resolve(Buffer.concat(parts).toString("latin1")));
  });
}

function assertRefused(text: string): void {
  const res = parseResponse(Buffer.from(text, "latin1"));
  assert.is(res.status, 503);
  assert.equal(JSON.parse(res.body.toString()), {
    error: "session worker unavailable",
    code: "TITO_ERR_WORKER_UNAVAILABLE",
  });
  assert.is(res.headers["x-fixture"], "router", "the router's headers come first");
  assert.is(res.headers["connection"], "close");
  assert.ok(res.complete);
}

test("a socket goes to the running process of its shard and epoch", async () => {
  const shard = tree.tree().shards[0]!;
  assert.is(await handOff(0, "current"), `taken by ${shard.pid}\n`);
});

test("no such shard, or another epoch: the host answers 503 itself", async () => {
  assertRefused(await handOff(7, 1));
  const epoch = tree.events().filter((e) => e.actor === "shard-0" && e.kind === "spawned").length;
  assertRefused(await handOff(0, epoch + 1));
  assertRefused(await handOff(0, epoch - 1));
});

test("a worker that died: 503 for its epoch, and the next one takes sockets of its own", async () => {
  const since = tree.ring.lastSeq;
  const dead = tree.tree().shards[0]!.pid!;
  const epoch = tree.events().filter((e) => e.actor === "shard-0" && e.kind === "spawned").length;
  process.kill(dead, "SIGKILL");
  await waitForEvent(
    tree,
    () => tree.events(since),
    (e) => e.actor === "shard-0" && e.kind === "exited",
  );
  assertRefused(await handOff(0, epoch));
  await waitForEvent(
    tree,
    () => tree.events(since),
    (e) => e.actor === "shard-0" && e.kind === "restarted",
  );
  const next = tree.tree().shards[0]!.pid!;
  assert.is.not(next, dead);
  assertRefused(await handOff(0, epoch));
  assert.is(await handOff(0, epoch + 1), `taken by ${next}\n`);
});

test("the host keeps none of the sockets it passed on or answered", async () => {
  const before = { host: tcpSockets(process.pid) };
  for (let i = 0; i < 20; i++) {
    await handOff(0, "current");
    await handOff(0, 0);
  }
  const after = await settle(() => ({ host: tcpSockets(process.pid) }), before);
  assert.ok(after.host <= before.host, `host TCP sockets ${before.host} -> ${after.host}`);
});

test.run();
