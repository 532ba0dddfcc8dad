// The worker's side of the records handoff (server/worker/records-handoff.ts), on real TCP
// sockets: a kept response goes to the socket handed over for its ticket, once; a socket
// whose ticket is unknown is closed with nothing written; a response nobody claims within
// the park time is dropped, its pooled buffers released and its stream stopped.
import { createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { releasable } from "../../buffers/release.ts";
import type { RecordsHandoff } from "../../server/handoff/records-handoff-message.ts";
import { ParkedResponses } from "../../server/worker/records-handoff.ts";
import { WorkerMetrics } from "../../server/worker/worker-metrics.ts";
import { rawGet } from "../helpers/raw-http.ts";

let server: Server;
let url = "";
let accepted: (socket: Socket) => void = (socket) => socket.destroy();

test.before(async () => {
  server = createServer((socket) => accepted(socket));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

test.after(() => new Promise<void>((resolve) => server.close(() => resolve())));

const handoff = (ticket: string): RecordsHandoff => ({
  type: "records-handoff",
  shard: 0,
  epoch: 1,
  ticket,
  headers: { "x-tito-shard": "0" },
  refusal: { status: 503, code: "TITO_ERR_WORKER_UNAVAILABLE", message: "session worker unavailable" },
});

function outcomes(metrics: WorkerMetrics): Record<string, number> {
  const counter = metrics.json().find((m) => m.name === "tito_worker_records_handoffs_total");
  const out: Record<string, number> = {};
  for (const v of (counter?.values ?? []) as { labels: { outcome: string }; value: number }[])
    out[v.labels.outcome] = v.value;
  return out;
}

test("a kept response is written to its ticket's socket, once; an unknown ticket's socket is closed", async () => {
  const metrics = new WorkerMetrics(0, () => 0);
  const parked = new ParkedResponses(metrics);
  parked.park("t-1", { status: 200, headers: { "content-type": "application/json" }, body: Buffer.from("{}") });
  accepted = (socket) => void parked.deliver(handoff("t-1"), socket);
  const res = await rawGet(url, "/");
  assert.is(res.status, 200);
  assert.is(res.body.toString(), "{}");
  assert.is(res.headers["x-tito-shard"], "0");
  assert.is(parked.size, 0);
  // The same ticket again: nothing is kept for it any more.
  await rawGet(url, "/").then(
    () => assert.unreachable("a response for a claimed ticket"),
    (err: Error) => assert.match(err.message, /no response head in 0 bytes/),
  );
  assert.equal(outcomes(metrics), { written: 1, unclaimed: 1 });
});

test("a response nobody claims is dropped after the park time: buffers released, stream stopped", async () => {
  const metrics = new WorkerMetrics(0, () => 0);
  const parked = new ParkedResponses(metrics, undefined, { parkMs: 20 });
  const released = new Promise<void>((resolve) => {
    let left = 2;
    const piece = (text: string) => releasable(Buffer.from(text), () => --left === 0 && resolve());
    parked.park("buffers", { status: 200, headers: {}, body: [piece("a"), piece("b")] });
  });
  const stopped = new Promise<void>((resolve) => {
    const stream: AsyncIterableIterator<Buffer> = {
      [Symbol.asyncIterator]: () => stream,
      next: async () => ({ done: false, value: Buffer.from("x") }),
      return: async () => {
        resolve();
        return { done: true, value: undefined };
      },
    };
    parked.park("stream", { status: 200, headers: {}, body: stream });
  });
  await Promise.all([released, stopped]);
  assert.is(parked.size, 0);
  assert.equal(outcomes(metrics), { expired: 2 });
});

test.run();
