// OpenAI content-part lists (`content: [{"type": "text", "text": "…"}]`, as many agent
// SDKs send every message) through the session core against the simulated engine: text
// parts give exactly the prompt ids of their texts joined by a space (as SGLang prepares them
// for a template that does not loop over message.content), a client may switch between
// the two shapes from one turn to the next, and image, audio or file parts are a 400
// naming the part, before anything reaches the engine.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { coreFor } from "../helpers/core.ts";
import type { CoreResponse, SessionCore } from "../../sessions/index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import type { SessionBody } from "../helpers/bodies.ts";
import { qwen3 } from "./fixtures.ts";

let engine: SimEngine;
let core: SessionCore;

const text = (r: CoreResponse) => (Array.isArray(r.body) ? Buffer.concat(r.body) : (r.body as Buffer)).toString();
const json = <T>(r: CoreResponse) => JSON.parse(text(r)) as T;
const parts = (...texts: string[]) => texts.map((t) => ({ type: "text", text: t }));

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: qwen3() });
  core = coreFor({ engineUrl: engine.url, tokenizerFolder: qwen3() });
});
test.after(async () => {
  await core?.close();
  await engine?.close();
});

async function session(): Promise<string> {
  return json<{ session_id: string }>(await core.create()).session_id;
}

async function turn(id: string, messages: unknown[]): Promise<CoreResponse> {
  return core.chat(id, {
    method: "POST",
    path: "/v1/chat/completions",
    query: "",
    headers: { "content-type": "application/json" },
    body: Buffer.from(JSON.stringify({ model: "m", messages })),
  });
}

async function records(id: string) {
  return json<SessionBody>(await core.get(id)).records;
}

async function firstPromptIds(on: SessionCore, messages: unknown[]): Promise<number[]> {
  const id = json<{ session_id: string }>(await on.create()).session_id;
  const res = await on.chat(id, {
    method: "POST",
    path: "/v1/chat/completions",
    query: "",
    headers: { "content-type": "application/json" },
    body: Buffer.from(JSON.stringify({ model: "m", messages })),
  });
  assert.is(res.status, 200, text(res));
  const ids = json<SessionBody>(await on.get(id)).records[0]!.request.input_ids;
  assert.ok(ids.length > 10);
  assert.not.match(qwen3().decode(ids), '"type"', "no part rendered as JSON");
  return ids;
}

test("text parts on every role give the prompt ids of their texts joined by a space, as SGLang joins them", async () => {
  // The qwen3 family's template does not loop over message.content: SGLang's content format
  // for it is "string", so a list reaches it as its texts joined by " " (issue 39).
  const strings = [
    { role: "system", content: "You are terse." },
    { role: "user", content: "What is the weather in Paris? Answer briefly." },
  ];
  const listed = [
    { role: "system", content: parts("You are terse.") },
    { role: "user", content: parts("What is the weather in Paris?", "Answer briefly.") },
  ];
  assert.equal(await firstPromptIds(core, listed), await firstPromptIds(core, strings), "the same prompt ids");
});

test("a template that cannot take a list (the folder's own Qwen3 one) gets the texts joined by a space", async () => {
  // Before: 400 "chat template failed to render the messages: Cannot call something that is not a function".
  const plain = coreFor({ engineUrl: engine.url, tokenizerFolder: qwen3(), titoFamily: "default" });
  try {
    const strings = [
      { role: "system", content: "You are terse." },
      { role: "user", content: "What is the weather in Paris? Answer briefly." },
    ];
    const listed = [
      { role: "system", content: parts("You are terse.") },
      { role: "user", content: parts("What is the weather in Paris?", "Answer briefly.") },
    ];
    assert.equal(await firstPromptIds(plain, listed), await firstPromptIds(plain, strings), "the same prompt ids");
  } finally {
    await plain.close();
  }
});

test("a client may send a message as a string once and as text parts the next turn: no rollback", async () => {
  const id = await session();
  const first = await turn(id, [{ role: "user", content: parts("Hello there.") }]);
  assert.is(first.status, 200, text(first));
  const assistant = json<{ choices: [{ message: unknown }] }>(first).choices[0].message;
  const second = await turn(id, [
    { role: "user", content: "Hello there." },
    assistant,
    { role: "user", content: parts("And now?") },
  ]);
  assert.is(second.status, 200, text(second));
  const kept = await records(id);
  assert.is(kept.length, 2, "both turns kept: nothing rolled back");
  const firstIds = kept[0]!.request.input_ids;
  assert.equal(kept[1]!.request.input_ids.slice(0, firstIds.length), firstIds);
});

test("image, audio and file parts are a 400 naming the part; nothing reaches the engine", async () => {
  const id = await session();
  const before = engine.requests;
  const cases: Array<[unknown, RegExp]> = [
    [
      { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
      /^messages\[1\]\.content\[1\] is a 'image_url' part, which is not supported: only text parts/,
    ],
    [
      { type: "input_audio", input_audio: { data: "AAAA", format: "wav" } },
      /'input_audio' part, which is not supported/,
    ],
    [{ type: "file", file: { file_id: "f1" } }, /'file' part, which is not supported/],
    [{ type: "text", text: 42 }, /^messages\[1\]\.content\[1\] must be a text part/],
  ];
  for (const [part, message] of cases) {
    const res = await turn(id, [
      { role: "system", content: "s" },
      { role: "user", content: [{ type: "text", text: "What is this?" }, part] },
    ]);
    assert.is(res.status, 400, text(res));
    assert.match(json<{ error: string }>(res).error, message);
  }
  assert.is(engine.requests, before, "no request went upstream");
  assert.equal(await records(id), []);
});

test.run();
