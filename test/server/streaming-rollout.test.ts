// A streamed turn in the RL loop, on the in-process tree: it is in flight until its stream is
// over, not just until it began. A session whose turn is still streaming (the engine held
// mid-stream past --session-idle-ttl-s 1) is not expired under it; a pause that drains
// waits for the stream's [DONE]; a pause that aborts ends the stream with the retryable
// turn-aborted error event (Anthropic's error event on /v1/messages), and nothing is committed.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { rolloutUntil, tracked } from "../helpers/rollout.ts";
import { call, untilSessionGone } from "../helpers/server.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

let engine: SimEngine;
let server: InProcessTree;
let hold: Promise<void> | undefined;
let reached: () => void = () => {};

test.before(async () => {
  engine = await startSimEngine({
    tokenizerFolder: sharedFolder(),
    onStreamChunk: (_route, index) => {
      if (index !== 3 || !hold) return;
      reached();
      return hold;
    },
  });
  server = await startTree({
    engineUrl: engine.url,
    engineApi: "sglang-generate",
    workers: 1,
    sessionIdleTtlS: 1,
    logLevel: "warn",
  });
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

/** A streamed turn on a new session (chat, or Anthropic's messages), held by the engine at its 4th token. */
async function heldStream(route = "/v1/chat/completions") {
  const id = (await server.createSession()).sessionId;
  let release!: () => void;
  hold = new Promise<void>((r) => (release = r));
  const atEngine = new Promise<void>((r) => (reached = r));
  const res = await fetch(`${server.url}/sessions/${id}${route}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "m",
      stream: true,
      max_tokens: 100,
      messages: [{ role: "user", content: "Hello?" }],
    }),
  });
  assert.is(res.status, 200, "the stream has begun");
  await atEngine;
  return {
    id,
    res,
    release: () => {
      hold = undefined;
      release();
    },
  };
}

const recordCount = async (id: string) =>
  (await call<{ records: unknown[] }>(server.url, "GET", `/sessions/${id}`)).json.records.length;

test("a pause that drains waits for a streamed turn's [DONE]", async () => {
  const { id, res, release } = await heldStream();
  const pause = tracked(server.pause({ inFlight: "drain" }));
  const status = await rolloutUntil(server.url, (s) => s.state === "paused");
  assert.is(status.in_flight, 1, "the streaming turn is in flight");
  assert.is(pause.settled(), false, "a drain waits for the stream");
  release();
  assert.ok((await res.text()).endsWith("data: [DONE]\n\n"));
  assert.is((await pause.promise).drained, 1);
  assert.is(await recordCount(id), 1);
  await server.resume("v1");
});

test("a pause that aborts ends a streamed turn with the turn-aborted event; nothing is committed", async () => {
  const { id, res, release } = await heldStream();
  const outcome = await server.pause({ inFlight: "abort" });
  assert.is(outcome.aborted, 1);
  const raw = await res.text();
  release();
  const last = JSON.parse(raw.trimEnd().split("\n\n").at(-1)!.slice(6));
  assert.equal([last.error.type, last.error.code], ["TITO_ERR_TURN_ABORTED", 503]);
  assert.match(last.error.message, /^turn aborted: the server paused for a weight update/);
  assert.not.ok(raw.includes("[DONE]"));
  assert.is(await recordCount(id), 0);
  await server.resume("v2");
});

test("an Anthropic stream aborted by a pause ends with Anthropic's error event, not message_stop", async () => {
  const { id, res, release } = await heldStream("/v1/messages");
  assert.is((await server.pause({ inFlight: "abort" })).aborted, 1);
  const raw = await res.text();
  release();
  const events = raw.trimEnd().split("\n\n");
  assert.match(events[0]!, /^event: message_start\n/);
  const [name, data] = events.at(-1)!.split("\n");
  assert.is(name, "event: error");
  const body = JSON.parse(data!.slice("data: ".length));
  assert.equal([body.type, body.error.type], ["error", "overloaded_error"]);
  assert.match(body.error.message, /^turn aborted: the server paused for a weight update/);
  assert.not.ok(raw.includes("message_stop"));
  assert.is(await recordCount(id), 0);
  await server.resume("v3");
});

test("a session whose turn is still streaming is not expired under it", async () => {
  const { id: streaming, res, release } = await heldStream();
  try {
    // Touched after the stream began: once it expired, a sweep was past the streaming one's due time.
    const marker = (await server.createSession()).sessionId;
    await untilSessionGone(server.url, marker);
    const listed = await call<{ sessions: string[] }>(server.url, "GET", "/sessions");
    assert.ok(listed.json.sessions.includes(streaming), "a session with a turn streaming is never idle");
  } finally {
    release();
  }
  assert.ok((await res.text()).endsWith("data: [DONE]\n\n"));
  const got = await call<{ records: unknown[] }>(server.url, "GET", `/sessions/${streaming}`);
  assert.is(got.json.records.length, 1);
});

test.run();
