// Ending a session's work (server/router/session-abort.ts): POST /sessions/{id}/abort
// stops the chat turn in flight at the engine, on the chat route (streamed and not) and on
// the Anthropic route, whose client gets the abort 503 with nothing committed; the session
// is finished (later turns 409, records and samples still served). POST /admin/abort
// {"older_than_s"} finishes exactly the sessions whose turn has been in flight that long.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { call, chat, newSession, startGatedEngine, type GatedEngine } from "../helpers/server.ts";
import type { SessionBody } from "../helpers/bodies.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

let engine: GatedEngine;
let server: InProcessTree;
let base: string;

test.before(async () => {
  const tokenizerFolder = sharedFolder();
  engine = await startGatedEngine({ tokenizerFolder });
  server = await startTree({ engineUrl: engine.url, engineApi: "sglang-chat", workers: 2, tokenizerFolder });
  base = server.url;
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

const ASK = [{ role: "user", content: "What is the weather in Paris?" }];

const turns = {
  chat: (id: string) => call(base, "POST", `/sessions/${id}/v1/chat/completions`, { model: "m", messages: ASK }),
  "chat, streamed": (id: string) =>
    call(base, "POST", `/sessions/${id}/v1/chat/completions`, { model: "m", messages: ASK, stream: true }),
  anthropic: (id: string) =>
    call(base, "POST", `/sessions/${id}/v1/messages`, { model: "m", max_tokens: 100, messages: ASK }),
};

for (const [route, send] of Object.entries(turns))
  test(`${route}: abort stops the turn at the engine, 503 and nothing committed; the session is finished`, async () => {
    const id = await newSession(base);
    const gate = engine.hold();
    const pending = send(id);
    await gate.arrived;
    const aborted = await call<{ finished: boolean; aborted_turns: number }>(base, "POST", `/sessions/${id}/abort`);
    gate.release();
    assert.is(aborted.status, 200);
    assert.equal([aborted.json.finished, aborted.json.aborted_turns], [true, 1]);
    const res = await pending;
    // The Anthropic route answers a 503 as Anthropic's 529 overloaded_error (sessions/messages-turn.ts).
    assert.is(res.status, route === "anthropic" ? 529 : 503, res.text);
    assert.match(res.text, "session was finished");
    const records = await call<SessionBody>(base, "GET", `/sessions/${id}`);
    assert.is(records.status, 200);
    assert.is(records.json.records.length, 0);
    const later = await chat<{ error: string }>(base, id, ASK);
    assert.is(later.res.status, 409);
    assert.match(later.res.json.error, "session finished");
    assert.is((await call(base, "POST", `/sessions/${id}/samples`, {})).status, 200);
  });

test("abort of an unknown session is a 404; of an idle one finishes it with no turn aborted", async () => {
  assert.is((await call(base, "POST", "/sessions/nope/abort")).status, 404);
  const id = await newSession(base);
  const first = await chat(base, id, ASK);
  assert.is(first.res.status, 200);
  const aborted = await call<{ aborted_turns: number }>(base, "POST", `/sessions/${id}/abort`);
  assert.equal([aborted.status, aborted.json.aborted_turns], [200, 0]);
  assert.is((await call<SessionBody>(base, "GET", `/sessions/${id}`)).json.records.length, 1, "records stay");
  assert.is((await chat(base, id, [...ASK, first.message!, { role: "user", content: "More?" }])).res.status, 409);
});

test("/admin/abort finishes exactly the sessions in flight longer than older_than_s", async () => {
  const [old, young, idle] = [await newSession(base), await newSession(base), await newSession(base)];
  assert.is((await chat(base, idle, ASK)).res.status, 200);
  const gate = engine.hold();
  const oldTurn = turns.chat(old);
  await gate.arrived;
  // The old turn's age must pass the bound; the young one's start comes after that.
  await new Promise((resolve) => setTimeout(resolve, 1_200));
  const youngTurn = turns.chat(young);
  await new Promise((resolve) => setImmediate(resolve));
  const cut = await call<{ finished: string[] }>(base, "POST", "/admin/abort", { older_than_s: 1 });
  assert.is(cut.status, 200);
  assert.equal(cut.json.finished, [old]);
  gate.release();
  assert.is((await oldTurn).status, 503);
  assert.is((await youngTurn).status, 200, "the young turn runs on and commits");
  assert.is(
    (await chat(base, idle, [...ASK, { role: "assistant", content: "x" }, { role: "user", content: "y" }])).res
      .status !== 409,
    true,
  );
  for (const bad of [{ older_than_s: -1 }, { older_than_s: "1" }, { older: 1 }])
    assert.is((await call(base, "POST", "/admin/abort", bad)).status, 400);
});

test.run();
