// Issue 38, Anthropic `ping` events, the failure paths the official SDK cannot show: a
// streamed Messages turn that waits on its engine (sglang-chat asks it without a stream)
// past the ping interval and then fails with an engine error that is not an abort ends
// with an `error` event (api_error), never message_delta/message_stop, nothing committed;
// a reader that leaves while the turn waits leaves nothing committed, and the retry commits
// once; a turn answered within the interval keeps its plain HTTP status. Through the
// session core and messagesTurn with the adapter a worker wires, against the simulated
// engine held at a gate the test opens (no timing assumption beyond "the engine waits").
import { test } from "uvu";
import * as assert from "uvu/assert";
import { createEngine } from "../../engine/index.ts";
import { createSessionCore, messagesTurn, type CoreResponse, type SessionCore } from "../../sessions/index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { responseText } from "../helpers/core.ts";
import { qwen3 } from "../sessions/fixtures.ts";

const folder = qwen3();
let engine: SimEngine;
let core: SessionCore;
/** The engine holds each request until this opens; then fails it when `failNext`. */
let gate: Promise<void> = Promise.resolve();
let failNext = false;
let replied: () => void = () => {};

test.before(async () => {
  engine = await startSimEngine({
    tokenizerFolder: folder,
    beforeReply: async () => {
      await gate;
      replied();
      if (!failNext) return;
      failNext = false;
      throw new Error("simulated engine failure");
    },
  });
  core = createSessionCore({
    engine: createEngine({
      api: "sglang-chat",
      engineUrl: engine.url,
      timeoutMs: 60_000,
      connectTimeoutMs: 10_000,
      routingReplay: false,
      indexerReplay: false,
      dropAuthorization: false,
      pooledReplies: false,
    }),
    tokenizerFolder: folder,
  });
});
test.after(async () => {
  await core?.close();
  await engine?.close();
});

const session = async () => JSON.parse(await responseText(await core.create())).session_id as string;

const turn = (id: string, stream = true): Promise<CoreResponse> =>
  messagesTurn(
    core,
    id,
    {
      method: "POST",
      path: "/v1/messages",
      query: "",
      headers: {},
      body: Buffer.from(
        JSON.stringify({ model: "claude-x", max_tokens: 200, stream, messages: [{ role: "user", content: "hi" }] }),
      ),
    },
    undefined,
    {},
    { pingMs: 10 },
  );

/**
 * Holds the engine; returns the key that lets it answer, and a promise of its answer having
 * started. It opens by itself after 5 s, so a route that waits for the engine before it
 * answers fails the assertions instead of hanging.
 */
function hold(): { open: () => void; answered: Promise<void> } {
  let open!: () => void;
  gate = new Promise<void>((resolve) => (open = resolve));
  setTimeout(() => open(), 5_000).unref();
  const answered = new Promise<void>((resolve) => (replied = resolve));
  return { open, answered };
}

const records = async (id: string) =>
  (JSON.parse(await responseText(await core.get(id))) as { records: unknown[] }).records.length;

const names = (text: string) => [...text.matchAll(/^event: (\S+)$/gm)].map((m) => m[1]);

test("an engine error (not an abort) after the stream began ends with an api_error event, nothing committed", async () => {
  const id = await session();
  const { open } = hold();
  failNext = true;
  const res = await turn(id);
  assert.is(res.status, 200, "the stream began while the engine worked");
  const body = res.body as AsyncIterable<Buffer>;
  const it = body[Symbol.asyncIterator]();
  const head = [(await it.next()).value as Buffer, (await it.next()).value as Buffer].map(String).join("");
  assert.equal(names(head), ["message_start", "ping"]);
  open();
  let rest = "";
  for (let next = await it.next(); next.done !== true; next = await it.next()) rest += String(next.value);
  const events = names(head + rest);
  assert.is(events.at(-1), "error", rest);
  assert.not.ok(events.includes("message_stop") || events.includes("message_delta"), rest);
  const error = JSON.parse(/event: error\ndata: (.*)\n\n$/.exec(rest)![1]!) as { error: { type: string } };
  assert.is(error.error.type, "api_error");
  assert.is(await records(id), 0);
});

test("a reader that leaves while the turn waits: nothing committed; the retry commits once", async () => {
  const id = await session();
  const { open, answered } = hold();
  const res = await turn(id);
  assert.is(res.status, 200);
  const it = (res.body as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
  assert.equal(names(String((await it.next()).value)), ["message_start"]);
  await it.return?.(undefined);
  open();
  await answered;
  assert.is(await records(id), 0, "the reader left: not committed");
  gate = Promise.resolve();
  const again = await turn(id);
  const text = await responseText(again);
  assert.is(again.status, 200);
  assert.equal(names(text).slice(-2), ["message_delta", "message_stop"], text);
  assert.is(await records(id), 1);
});

test("a turn that fails within the interval keeps its HTTP status (no events)", async () => {
  const id = await session();
  gate = Promise.resolve();
  failNext = true;
  const res = await messagesTurn(
    core,
    id,
    {
      method: "POST",
      path: "/v1/messages",
      query: "",
      headers: {},
      body: Buffer.from(
        JSON.stringify({ model: "x", max_tokens: 10, stream: true, messages: [{ role: "user", content: "hi" }] }),
      ),
    },
    undefined,
    {},
    { pingMs: 60_000 },
  );
  assert.ok(res.status >= 500, String(res.status));
  const body = JSON.parse(await responseText(res)) as { type: string; error: { type: string } };
  assert.is(body.type, "error");
  assert.is(body.error.type, "api_error");
  assert.is(await records(id), 0);
});

test.run();
