// Idempotent replay (sessions/turn-replay.ts): the official `openai` client, whose first
// attempt committed but whose reply was lost (a proxy in front of the server holds that
// reply until the client's timeout gives up), retries with `x-stainless-retry-count: 1`
// and gets the committed reply again, bytes for bytes, streamed and not, with one engine
// generation and one record; an `Idempotency-Key` equal to the committed turn's does the
// same; the same body without either header is generated again as before.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { createServer, request as httpRequest, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { call, newSession } from "../helpers/server.ts";
import type { SessionBody } from "../helpers/bodies.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

let engine: SimEngine;
let server: InProcessTree;

test.before(async () => {
  const tokenizerFolder = sharedFolder();
  engine = await startSimEngine({ tokenizerFolder });
  server = await startTree({ engineUrl: engine.url, engineApi: "sglang-chat", workers: 1, tokenizerFolder });
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

interface Forwarded {
  retryCount: string | undefined;
  status: number;
  body: Buffer;
}

/**
 * An HTTP proxy to the server that loses the reply of the first chat attempt: it reads the
 * server's whole reply (so the turn committed), then answers nothing until the client
 * closes the connection. A retry is forwarded only after that first reply was read whole.
 */
async function lossyProxy(target: string): Promise<{ url: string; forwarded: Forwarded[]; close(): Promise<void> }> {
  const forwarded: Forwarded[] = [];
  let firstRead: Promise<void> | undefined;
  const forward = (req: IncomingMessage, body: Buffer) =>
    new Promise<{ res: IncomingMessage; body: Buffer }>((resolve, reject) => {
      const up = httpRequest(target + req.url, { method: req.method, headers: req.headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ res, body: Buffer.concat(chunks) }));
        res.on("error", reject);
      });
      up.on("error", reject);
      up.end(body);
    });
  const proxy: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => void answer());
    const answer = async () => {
      const retryCount = req.headers["x-stainless-retry-count"] as string | undefined;
      const isChat = req.url!.endsWith("/chat/completions");
      const lose = isChat && firstRead === undefined;
      const reply = forward(req, Buffer.concat(chunks));
      if (lose) firstRead = reply.then(() => {});
      else if (isChat) await firstRead;
      const up = await reply;
      forwarded.push({ retryCount, status: up.res.statusCode!, body: up.body });
      if (lose) return; // the reply is lost: the client times out and retries
      res.writeHead(up.res.statusCode!, { "content-type": up.res.headers["content-type"] ?? "application/json" });
      res.end(up.body);
    };
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  return {
    url,
    forwarded,
    close: () => {
      proxy.closeAllConnections();
      return new Promise((resolve) => proxy.close(() => resolve()));
    },
  };
}

const ASK = [{ role: "user" as const, content: "What is the weather in Paris?" }];

async function replayedTurns(): Promise<number> {
  const text = (await call(server.url, "GET", "/metrics")).text;
  const line = text.split("\n").find((l) => l.startsWith("tito_replayed_turns_total"));
  return line === undefined ? 0 : Number(line.split(" ").pop());
}

async function recordCount(id: string): Promise<number> {
  const res = await call<SessionBody>(server.url, "GET", `/sessions/${id}`);
  assert.is(res.status, 200);
  return res.json.records.length;
}

for (const streamed of [false, true])
  test(`openai client, ${streamed ? "streamed" : "not streamed"}: a retry after a lost committed reply gets it again, one generation`, async () => {
    const id = await newSession(server.url);
    const proxy = await lossyProxy(server.url);
    try {
      const openai = new OpenAI({
        baseURL: `${proxy.url}/sessions/${id}/v1`,
        apiKey: "unused",
        timeout: 500,
        maxRetries: 2,
      });
      const before = engine.requests;
      const replayedBefore = await replayedTurns();
      let text: string;
      if (streamed) {
        const stream = await openai.chat.completions.create({ model: "m", messages: ASK, stream: true });
        text = "";
        for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
      } else {
        const reply = await openai.chat.completions.create({ model: "m", messages: ASK });
        text = reply.choices[0]!.message.content ?? "";
      }
      assert.is(engine.requests - before, 1, "one engine generation for both attempts");
      const chats = proxy.forwarded;
      assert.equal(
        chats.map((f) => [f.retryCount, f.status]),
        [
          ["0", 200],
          ["1", 200],
        ],
      );
      assert.ok(chats[0]!.body.equals(chats[1]!.body), "the retry's reply is the committed one, bytes for bytes");
      assert.ok(text.length > 0);
      assert.is(await recordCount(id), 1, "one committed turn, not rolled back and generated again");
      assert.is((await replayedTurns()) - replayedBefore, 1);
    } finally {
      await proxy.close();
    }
  });

test("the same body without a retry header is generated again; an equal Idempotency-Key replays", async () => {
  const id = await newSession(server.url);
  const path = `/sessions/${id}/v1/chat/completions`;
  const body = JSON.stringify({ model: "m", messages: ASK });
  const before = engine.requests;
  const first = await call(server.url, "POST", path, body, { "idempotency-key": "k1" });
  assert.is(first.status, 200);
  const again = await call(server.url, "POST", path, body);
  assert.is(again.status, 200);
  assert.is(engine.requests - before, 2, "no header: the turn is rolled back and generated again");
  const keyed = await call(server.url, "POST", path, body, { "idempotency-key": "k2" });
  assert.is(engine.requests - before, 3);
  const replayed = await call(server.url, "POST", path, body, { "idempotency-key": "k2" });
  assert.is(engine.requests - before, 3, "the same key again: no engine call");
  assert.is(replayed.text, keyed.text);
  // A retry header with a different body is a new turn (here a rollback and a generation).
  const other = JSON.stringify({ model: "m", messages: ASK, temperature: 0 });
  const changed = await call(server.url, "POST", path, other, { "x-stainless-retry-count": "1" });
  assert.is(changed.status, 200);
  assert.is(engine.requests - before, 4);
  assert.is(await recordCount(id), 1);
});

test.run();
