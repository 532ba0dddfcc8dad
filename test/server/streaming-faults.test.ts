// `stream: true` when things go wrong, through the in-process tree on every engine API: events
// reach the client while the engine is still generating (held at a token until the client
// has seen one); a client that leaves mid-stream stops the engine request and nothing is
// committed, and the same turn then goes through; an engine that fails mid-stream ends the
// stream with an error event (no `[DONE]`, nothing recorded); and a character whose tokens
// the engine sends in separate chunks reaches the client whole.
import { test } from "uvu";
import * as assert from "uvu/assert";
import OpenAI from "openai";
import { startSimEngine, type SimEngine, type SimRoute } from "../../server/sim-engine/sim-engine.ts";
import { qwen3 } from "../sessions/fixtures.ts";
import { call, newSession } from "../helpers/server.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

type Api = "sglang-chat" | "sglang-generate" | "vllm-completions";
const APIS: Api[] = ["sglang-chat", "sglang-generate", "vllm-completions"];
const ROUTE: Record<Api, SimRoute> = {
  "sglang-chat": "/v1/chat/completions",
  "sglang-generate": "/generate",
  "vllm-completions": "/v1/completions",
};

/** A tool whose only argument holds a character the Qwen tokenizer spells with three tokens. */
const GLYPH = "𓀀";
const GLYPH_TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string", enum: [`${GLYPH} Paris`] } } },
  },
};

let onChunk: ((route: SimRoute, index: number) => void | Promise<void>) | undefined;
let onClosed: ((route: SimRoute, whole: boolean) => void) | undefined;
let beforeReply: (() => void | Promise<void>) | undefined;
let engine: SimEngine;
const servers = new Map<Api, InProcessTree>();

test.before(async () => {
  engine = await startSimEngine({
    tokenizerFolder: sharedFolder(),
    reasoning: true,
    onStreamChunk: (route, index) => onChunk?.(route, index),
    onReplyClosed: (route, whole) => onClosed?.(route, whole),
    beforeReply: () => beforeReply?.(),
  });
  for (const api of APIS)
    servers.set(api, await startTree({ engineUrl: engine.url, engineApi: api, workers: 1, logLevel: "silent" }));
});
test.after(async () => {
  for (const s of servers.values()) await s.shutdown();
  await engine?.close();
});
test.after.each(() => {
  onChunk = onClosed = beforeReply = undefined;
});

const signal = () => {
  let fire!: () => void;
  const fired = new Promise<void>((r) => (fire = r));
  return { fired, fire };
};

/** Fails the test instead of hanging it when `p` never settles (a stream that was held back). */
const within = <T>(p: Promise<T>, what: string) =>
  Promise.race([
    p,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`never: ${what}`)), 30_000).unref()),
  ]);

const chatBody = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "Weather in Paris?" }], ...extra });

async function post(server: InProcessTree, id: string, body: string, abort?: AbortSignal) {
  return fetch(`${server.url}/sessions/${id}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
    signal: abort,
  });
}

/** Calls `onEvent` with each event's data as it arrives. */
async function readEvents(res: Response, onEvent: (data: string) => void | boolean): Promise<void> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffered += decoder.decode(value, { stream: true });
    for (let end = buffered.indexOf("\n\n"); end !== -1; end = buffered.indexOf("\n\n")) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      if (onEvent(event.replace(/^data: /, "")) === false) return reader.cancel();
    }
  }
}

const recordCount = async (server: InProcessTree, id: string) =>
  (await call<{ records: unknown[] }>(server.url, "GET", `/sessions/${id}`)).json.records.length;

for (const api of APIS.filter((a) => a !== "sglang-chat")) {
  test(`${api}: each event reaches the client before the engine generates the next token`, async () => {
    const server = servers.get(api)!;
    // The same turn unstreamed on another session tells which ids the engine will generate.
    const probe = await newSession(server.url);
    await post(server, probe, chatBody({ stream: false }));
    const ids = (await call<{ metadata: { accumulated_token_ids: number[] } }>(server.url, "GET", `/sessions/${probe}`))
      .json.metadata.accumulated_token_ids;
    const think = ids.lastIndexOf(qwen3().tokenId("<think>")!);
    const thought = ids.slice(think + 2, ids.indexOf(qwen3().tokenId("</think>")!, think)); // the reasoning's own ids
    const id = await newSession(server.url);
    // Lock step: the engine sends each token of the reasoning only once the client has
    // the reasoning up to the token before it. Were one event held back anywhere on the way
    // (worker, transport, router), this would never finish.
    let reasoning = "";
    let wake: () => void = () => {};
    onChunk = async (_route, index) => {
      const upTo = index - 2; // chunk 0 is <think>, chunk 1 a newline
      if (upTo < 1 || upTo > thought.length) return;
      const expected = qwen3().decode(thought.slice(0, upTo)).trimEnd();
      while (reasoning.length < expected.length)
        await within(new Promise<void>((r) => (wake = r)), `the reasoning up to ${JSON.stringify(expected)}`);
    };
    const res = await post(server, id, chatBody());
    const events: string[] = [];
    await readEvents(res, (data) => {
      events.push(data);
      if (data.startsWith("{")) reasoning += JSON.parse(data).choices[0]?.delta?.reasoning_content ?? "";
      wake();
    });
    assert.is(reasoning, qwen3().decode(thought).trim());
    assert.is(events.at(-1), "[DONE]");
    assert.is(await recordCount(server, id), 1);
  });
}

for (const api of APIS) {
  test(`${api}: a client that leaves mid-stream stops the engine; nothing is committed; the turn goes again`, async () => {
    const server = servers.get(api)!;
    const id = await newSession(server.url);
    const closed = signal();
    const reached = signal();
    const hold = new Promise<void>(() => {}); // the engine never gets past this point for this request
    onClosed = (route, whole) => {
      if (route === ROUTE[api] && !whole) closed.fire();
    };
    const client = new AbortController();
    if (api === "sglang-chat") {
      // Asked without a stream, the engine is left while it generates (the client sees no event before it is done).
      beforeReply = () => (reached.fire(), hold);
      const res = post(server, id, chatBody(), client.signal).catch(() => undefined);
      await within(reached.fired, "the request at the engine");
      client.abort();
      await res;
    } else {
      onChunk = (_route, index) => (index === 6 ? hold : undefined);
      const res = await post(server, id, chatBody(), client.signal);
      let events = 0;
      await readEvents(res, () => ++events < 3).catch(() => undefined);
      client.abort();
    }
    await within(closed.fired, "the engine's connection dropped by the worker");
    assert.is(await recordCount(server, id), 0, "nothing committed");
    onChunk = beforeReply = undefined;
    const again = await (await post(server, id, chatBody())).text();
    assert.ok(again.endsWith("data: [DONE]\n\n"));
    assert.is(await recordCount(server, id), 1, "the same turn went through");
  });

  test(`${api}: an engine that fails mid-stream ends the stream with an error event, not [DONE]`, async () => {
    const server = servers.get(api)!;
    const id = await newSession(server.url);
    const client = new OpenAI({ baseURL: `${server.url}/sessions/${id}/v1`, apiKey: "unused", maxRetries: 0 });
    const fail = () => {
      throw Object.assign(new Error("the GPU fell over"), { statusCode: 500 });
    };
    if (api === "sglang-chat") {
      // Asked without a stream: the engine's failure is its own status, before any event.
      beforeReply = fail;
      const res = await post(server, id, chatBody());
      assert.is(res.status, 500);
      assert.match(await res.text(), "the GPU fell over");
    } else {
      onChunk = (_route, index) => (index === 5 ? fail() : undefined);
      const raw = await (await post(server, id, chatBody())).text();
      const events = raw.trimEnd().split("\n\n");
      const last = JSON.parse(events.at(-1)!.slice(6)) as { error: { message: string; type: string; code: number } };
      assert.match(last.error.message, "the engine failed the generation: the GPU fell over");
      assert.is(last.error.type, "TITO_ERR_ENGINE_REPLY");
      assert.is(last.error.code, 502);
      assert.not.ok(raw.includes("[DONE]"));
      // The openai client throws the error event.
      const stream = await client.chat.completions.create({
        model: "m",
        stream: true,
        messages: [{ role: "user", content: "Weather in Paris?" }],
      });
      try {
        for await (const _ of stream);
        assert.unreachable("the stream should have thrown");
      } catch (err) {
        assert.instance(err, OpenAI.APIError);
        assert.match((err as Error).message, "the GPU fell over");
      }
    }
    assert.is(await recordCount(server, id), 0);
    beforeReply = onChunk = undefined;
    assert.ok((await (await post(server, id, chatBody())).text()).endsWith("data: [DONE]\n\n"));
    assert.is(await recordCount(server, id), 1);
  });

  test(`${api}: a character whose three tokens come in separate engine chunks reaches the client whole`, async () => {
    const server = servers.get(api)!;
    const id = await newSession(server.url);
    const raw = await (await post(server, id, chatBody({ tools: [GLYPH_TOOL] }))).text();
    assert.not.ok(raw.includes("\uFFFD"), "no replacement character anywhere");
    assert.ok(raw.includes(JSON.stringify(GLYPH).slice(1, -1)) || raw.includes(GLYPH));
    const events = raw.split("\n\n").filter((e) => e.startsWith("data: {"));
    const args = events
      .flatMap((e) => JSON.parse(e.slice(6)).choices?.[0]?.delta?.tool_calls ?? [])
      .map((c: { function?: { arguments?: string } }) => c.function?.arguments ?? "")
      .join("");
    assert.is(JSON.parse(args).city, `${GLYPH} Paris`);
    const got = (await call<{ metadata: { accumulated_token_ids: number[] } }>(server.url, "GET", `/sessions/${id}`))
      .json;
    const glyphIds = qwen3().encode(GLYPH);
    assert.is(glyphIds.length, 3);
    const ids = got.metadata.accumulated_token_ids.join(",");
    assert.ok(ids.includes(glyphIds.join(",")), "the engine generated the character as three tokens");
  });
}

test.run();
