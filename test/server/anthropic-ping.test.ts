// Issue 38, Anthropic `ping` events: a streamed Messages turn on an engine path that does not
// stream (`--engine-api sglang-chat` asks the engine with `stream: false`) starts its event
// stream while the engine works (message_start, then a ping each --anthropic-ping-ms), then
// the blocks, message_delta with the real usage and message_stop; an engine abort while it
// waits ends the stream with an `error` event (overloaded_error), nothing committed, and the
// retried turn commits once. Through the router and a worker (the in-process tree) with the official SDK; the engine
// holds its reply until the client has seen the pings (no timing assumption).
import { test } from "uvu";
import * as assert from "uvu/assert";
import Anthropic from "@anthropic-ai/sdk";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { call, newSession } from "../helpers/server.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

const PINGS_BEFORE_REPLY = 3;
let engine: SimEngine;
let server: InProcessTree;
/** Each engine request waits on this gate (opened by the client's recorder), then is aborted when `abortNext`. */
let gate: Promise<void> = Promise.resolve();
let abortNext = false;

test.before(async () => {
  engine = await startSimEngine({
    tokenizerFolder: sharedFolder(),
    beforeReply: async () => {
      await gate;
      if (!abortNext) return;
      abortNext = false;
      const res = await fetch(`${engine.url}/abort_request`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ abort_all: true }),
      });
      assert.is(res.status, 200);
    },
  });
  server = await startTree({
    engineUrl: engine.url,
    engineApi: "sglang-chat",
    workers: 1,
    tokenizerFolder: sharedFolder(),
    anthropicPingMs: 50,
  });
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

/**
 * An Anthropic client whose fetch keeps the raw event text of each reply, and opens the
 * engine's gate once that text holds PINGS_BEFORE_REPLY pings (or after 20 s, so a server
 * that never pings fails the count below instead of hanging).
 */
function client(id: string): { anthropic: Anthropic; raw: () => string } {
  let text = "";
  let open!: () => void;
  gate = new Promise<void>((resolve) => (open = resolve));
  const fallback = setTimeout(() => open(), 20_000).unref();
  const recording: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    if (res.body === null) return res;
    const decoder = new TextDecoder();
    const tee = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        text += decoder.decode(chunk, { stream: true });
        if (text.split("event: ping\n").length - 1 >= PINGS_BEFORE_REPLY) {
          clearTimeout(fallback);
          open();
        }
        controller.enqueue(chunk);
      },
    });
    return new Response(res.body.pipeThrough(tee), { status: res.status, headers: res.headers });
  };
  const anthropic = new Anthropic({
    baseURL: `${server.url}/sessions/${id}`,
    apiKey: "unused",
    maxRetries: 0,
    fetch: recording,
  });
  return { anthropic, raw: () => text };
}

const PARAMS = { model: "claude-x", max_tokens: 200, messages: [{ role: "user" as const, content: "Hi there" }] };

async function records(id: string) {
  const res = await call<{
    records: Array<{ response: { usage: { prompt_tokens: number; completion_tokens: number } } }>;
  }>(server.url, "GET", `/sessions/${id}`);
  assert.is(res.status, 200, res.text);
  return res.json.records;
}

/** The event names of a raw event stream, in order. */
const eventNames = (raw: string) => [...raw.matchAll(/^event: (\S+)$/gm)].map((m) => m[1]);

test("sglang-chat, streamed: message_start and pings while the engine works, then the message with real usage", async () => {
  const id = await newSession(server.url);
  const { anthropic, raw } = client(id);
  const message = await anthropic.messages.stream(PARAMS).finalMessage();
  const names = eventNames(raw());
  assert.is(names[0], "message_start", raw());
  assert.is(names[1], "ping", raw());
  const pings = names.filter((n) => n === "ping").length;
  assert.ok(pings >= PINGS_BEFORE_REPLY, `${pings} pings before the engine answered`);
  assert.match(raw(), /event: ping\ndata: \{"type":"ping"\}\n\n/);
  assert.equal(names.slice(-2), ["message_delta", "message_stop"]);
  assert.ok(names.indexOf("content_block_start") > names.lastIndexOf("ping"), "pings only before the content");
  assert.is(message.stop_reason, "end_turn");
  assert.ok(message.content.some((b) => b.type === "text" && b.text.length > 0));
  const recs = await records(id);
  assert.is(recs.length, 1);
  const usage = recs[0]!.response.usage;
  assert.ok(usage.completion_tokens > 0 && usage.prompt_tokens > 0);
  assert.is(message.usage.output_tokens, usage.completion_tokens);
  assert.is(message.usage.input_tokens, usage.prompt_tokens);
});

test("sglang-chat, streamed: an engine abort while pinging ends with overloaded_error; nothing committed; the retry commits once", async () => {
  const id = await newSession(server.url);
  const first = client(id);
  abortNext = true;
  let thrown: unknown;
  try {
    await first.anthropic.messages.stream(PARAMS).finalMessage();
  } catch (err) {
    thrown = err;
  }
  assert.instance(thrown, Anthropic.APIError, String(thrown));
  assert.is((thrown as { type?: unknown }).type, "overloaded_error");
  const names = eventNames(first.raw());
  assert.equal(names.slice(0, 2), ["message_start", "ping"], first.raw());
  assert.is(names.at(-1), "error");
  assert.not.ok(names.includes("message_stop") || names.includes("message_delta"), first.raw());
  const error = JSON.parse(/event: error\ndata: (.*)\n\n$/.exec(first.raw())![1]!) as {
    type: string;
    error: { type: string };
    request_id: string;
  };
  assert.is(error.type, "error");
  assert.is(error.error.type, "overloaded_error");
  assert.match(error.request_id, /^req_/);
  assert.is((await records(id)).length, 0, "a failed turn is not committed");

  const again = client(id);
  const message = await again.anthropic.messages.stream(PARAMS).finalMessage();
  assert.is(message.stop_reason, "end_turn");
  assert.ok(eventNames(again.raw()).includes("ping"));
  const recs = await records(id);
  assert.is(recs.length, 1, "the retried turn commits once");
  assert.is(message.usage.output_tokens, recs[0]!.response.usage.completion_tokens);
});

test("the non-streamed Messages turn on the same slow engine is one message, no events", async () => {
  const id = await newSession(server.url);
  const { anthropic } = client(id);
  gate = new Promise((resolve) => setTimeout(resolve, 200));
  const message = await anthropic.messages.create(PARAMS);
  assert.is(message.type, "message");
  assert.is((await records(id)).length, 1);
});

test.run();
