// A streamed engine reply in the engine client: the SSE reader's grammar (data lines joined,
// CRLF, other fields and comments skipped, an event cut at any byte, an unfinished last event
// dropped), and the client's flow control: a reader that falls behind holds at most the
// high-water mark plus one socket read in memory while the engine writes megabytes, every
// byte still arrives, and a reader that stops early closes the engine's connection.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { createServer, type Server, type ServerResponse } from "node:http";
import { setImmediate as tick } from "node:timers/promises";
import { EngineHttpAgent } from "../../engine/http-client.ts";
import { DEFAULT_HIGH_WATER_BYTES } from "../../engine/reply-stream.ts";
import { sseEvents } from "../../engine/sse-reader.ts";

async function* pieces(text: string, size: number) {
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

async function events(text: string, size: number): Promise<string[]> {
  const out: string[] = [];
  for await (const data of sseEvents(pieces(text, size))) out.push(data.toString());
  return out;
}

test("the SSE reader: data lines joined, CRLF, other fields skipped, cut at any byte, an unfinished event dropped", async () => {
  const stream =
    ': a comment\n\ndata: {"a":1}\n\nevent: ping\ndata: line one\ndata:line two\nid: 7\n\r\ndata: é✓𓀀\r\n\r\ndata: [DONE]\n\ndata: cut';
  for (const size of [1, 2, 3, 7, 1000])
    assert.equal(await events(stream, size), ['{"a":1}', "line one\nline two", "é✓𓀀", "[DONE]"], `pieces of ${size}`);
});

let server: Server;
let origin: URL;
let handler: (res: ServerResponse) => void = () => {};

test.before(async () => {
  server = createServer((_req, res) => handler(res));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  origin = new URL(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
});
test.after(() => new Promise<void>((r) => server.close(() => r())));

/** Writes `total` bytes of events, waiting for the socket each time it is full. */
async function writeEvents(res: ServerResponse, total: number): Promise<void> {
  res.writeHead(200, { "content-type": "text/event-stream" });
  const event = Buffer.from(`data: ${"x".repeat(1000)}\n\n`);
  for (let sent = 0; sent < total && !res.destroyed; sent += event.length)
    if (!res.write(event))
      await new Promise<void>((r) => {
        const done = () => (res.off("drain", done).off("close", done), r());
        res.on("drain", done).on("close", done);
      });
  res.end();
}

test("a reader that falls behind holds at most the high-water mark and one read; every byte arrives", async () => {
  const total = 4 * 2 ** 20;
  handler = (res) => void writeEvents(res, total);
  const agent = new EngineHttpAgent(origin);
  const res = await agent.send({ method: "POST", path: "/", headers: {}, body: Buffer.from("{}"), stream: true });
  const stream = res.stream!;
  let received = 0;
  let maxHeld = 0;
  for await (const piece of stream) {
    received += piece.length;
    maxHeld = Math.max(maxHeld, stream.bufferedBytes);
    await tick(); // a slow reader: one piece per turn of the event loop
  }
  assert.is(received, Buffer.byteLength(`data: ${"x".repeat(1000)}\n\n`) * Math.ceil(total / 1008));
  assert.ok(maxHeld > 0, "the reader did fall behind");
  assert.ok(maxHeld <= DEFAULT_HIGH_WATER_BYTES + 64 * 1024, `held ${maxHeld} bytes`);
  await agent.close();
});

test("a stream read to its end leaves its connection for the next request", async () => {
  handler = (res) => void writeEvents(res, 10_000);
  const agent = new EngineHttpAgent(origin);
  for (let i = 0; i < 3; i++) {
    const res = await agent.send({ method: "POST", path: "/", headers: {}, body: Buffer.from("{}"), stream: true });
    let n = 0;
    for await (const _ of sseEvents(res.stream!)) n++;
    assert.is(n, 10);
  }
  assert.is(agent.connections, 1, "one kept-alive connection served all three");
  await agent.close();
});

test("a reader that stops early closes the engine's connection", async () => {
  let closed!: () => void;
  const engineSawClose = new Promise<void>((r) => (closed = r));
  handler = (res) => {
    res.once("close", closed);
    void writeEvents(res, 64 * 2 ** 20);
  };
  const agent = new EngineHttpAgent(origin);
  const res = await agent.send({ method: "POST", path: "/", headers: {}, body: Buffer.from("{}"), stream: true });
  let n = 0;
  for await (const data of sseEvents(res.stream!)) if (++n === 3 && data.length > 0) break;
  await engineSawClose;
  assert.is(agent.connections, 0, "the connection is not kept for reuse");
  await agent.close();
});

test.run();
