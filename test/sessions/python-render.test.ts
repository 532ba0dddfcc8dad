// The six places where tito's prompt differed from the one the engine renders (issue 39),
// each through the session core against the simulated engine on a real npm tokenizer: the
// prompt ids the engine got, decoded, hold what Python's jinja2 (as transformers sets it up)
// writes after SGLang's message preparation. test/crosscheck/ compares whole conversations
// with that stack itself; these pin each case by name.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { compareTrajectories, messageLocator } from "../../sessions/drift.ts";
import { messagesTurn } from "../../sessions/messages-turn.ts";
import { selectFamily } from "../../sessions/families/index.ts";
import type { CoreResponse, SessionCore } from "../../sessions/index.ts";
import { promptContext } from "../../sessions/prompt-builder.ts";
import type { TokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import type { SessionBody } from "../helpers/bodies.ts";
import { coreFor } from "../helpers/core.ts";
import { npmFolder, type NpmTokenizer } from "./fixtures.ts";

const text = (r: CoreResponse) => (Array.isArray(r.body) ? Buffer.concat(r.body) : (r.body as Buffer)).toString();
const json = <T>(r: CoreResponse) => JSON.parse(text(r)) as T;

interface Rig {
  folder: TokenizerFolder;
  core: SessionCore;
  engine: SimEngine;
}

const rigs = new Map<NpmTokenizer, Rig>();

async function rig(name: NpmTokenizer): Promise<Rig> {
  let r = rigs.get(name);
  if (!r) {
    const folder = npmFolder(name);
    const engine = await startSimEngine({ tokenizerFolder: folder });
    r = { folder, engine, core: coreFor({ engineUrl: engine.url, tokenizerFolder: folder }) };
    rigs.set(name, r);
  }
  return r;
}

test.after(async () => {
  for (const r of rigs.values()) {
    await r.core.close();
    await r.engine.close();
  }
});

/** Sends `body` (raw JSON text, as a client wrote it) as a turn of session `id`. */
async function send(r: Rig, id: string, body: string): Promise<CoreResponse> {
  return r.core.chat(id, {
    method: "POST",
    path: "/v1/chat/completions",
    query: "",
    headers: { "content-type": "application/json" },
    body: Buffer.from(body),
  });
}

async function session(r: Rig): Promise<string> {
  return json<{ session_id: string }>(await r.core.create()).session_id;
}

/** The prompt of a one-turn session on `body`, decoded. */
async function firstPrompt(name: NpmTokenizer, body: string): Promise<string> {
  const r = await rig(name);
  const id = await session(r);
  const res = await send(r, id, body);
  assert.is(res.status, 200, text(res));
  return r.folder.decode(json<SessionBody>(await r.core.get(id)).records[0]!.request.input_ids);
}

// A tool schema and a call's arguments whose numbers and key order JSON.parse changes.
const SCHEMA =
  '{"type": "object", "properties": {"z": {"type": "number", "minimum": 30.0}, "10": {"type": "integer"}}}';
const TOOLS = `[{"type": "function", "function": {"name": "measure", "description": "d", "parameters": ${SCHEMA}}}]`;
const ARGS = '{"z": 30.0, "10": 1e-07, "big": 12345678901234567890}';
const CALL = JSON.stringify([{ id: "call_1", type: "function", function: { name: "measure", arguments: ARGS } }]);
const toolBody = `{"model": "m", "tools": ${TOOLS}, "messages": [
  {"role": "user", "content": "Measure."},
  {"role": "assistant", "content": "", "tool_calls": ${CALL}},
  {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]}`;

for (const name of ["qwen3", "llama3_1"] as const)
  test(`1. ${name}: tool schemas and call arguments keep 30.0, 1e-07, big integers and key order, as json.loads`, async () => {
    const prompt = await firstPrompt(name, toolBody);
    assert.ok(prompt.includes('{"z": 30.0, "10": 1e-07, "big": 12345678901234567890}'), prompt);
    // The schema: "z" before "10" and 30.0 kept (llama3 writes tools with indent=4).
    const schema = prompt.replace(/\s+/g, " ");
    assert.ok(
      schema.includes('"properties": { "z": { "type": "number", "minimum": 30.0 }, "10":') ||
        schema.includes('"properties": {"z": {"type": "number", "minimum": 30.0}, "10":'),
      prompt,
    );
  });

test("1. the Anthropic Messages route keeps a tool schema's and a tool_use input's numbers and key order too", async () => {
  const r = await rig("qwen3");
  const id = await session(r);
  const body = `{"model": "m", "max_tokens": 64,
    "tools": [{"name": "measure", "description": "d", "input_schema": ${SCHEMA}}],
    "messages": [
      {"role": "user", "content": "Measure."},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "measure", "input": ${ARGS}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}]}`;
  const res = await messagesTurn(r.core, id, {
    method: "POST",
    path: "/v1/messages",
    query: "",
    headers: { "content-type": "application/json" },
    body: Buffer.from(body),
  });
  assert.is(res.status, 200, text(res));
  const prompt = r.folder.decode(json<SessionBody>(await r.core.get(id)).records[0]!.request.input_ids);
  assert.ok(prompt.includes('{"z": 30.0, "10": 1e-07, "big": 12345678901234567890}'), prompt);
  assert.ok(prompt.includes('"properties": {"z": {"type": "number", "minimum": 30.0}, "10":'), prompt);
});

const partsBody = JSON.stringify({
  model: "m",
  messages: [
    {
      role: "user",
      content: [
        { type: "text", text: "part one" },
        { type: "text", text: "part two" },
      ],
    },
  ],
});

test("2. qwen3's fixed template: a text-part list is its texts joined by a space (SGLang's string format)", async () => {
  const prompt = await firstPrompt("qwen3", partsBody);
  assert.ok(prompt.includes("<|im_start|>user\npart one part two<|im_end|>"), prompt);
});

test("3. deepseek_v3's folder template ('…' + content): a text-part list is its texts joined by a space, not its JSON", async () => {
  const prompt = await firstPrompt("deepseek_v3", partsBody);
  assert.ok(prompt.includes("<｜User｜>part one part two<｜Assistant｜>"), prompt);
  assert.not.ok(prompt.includes('"type"'), prompt);
});

// U+FEFF is not whitespace to Python's str.strip (JavaScript's trim strips it); U+0085 is (JavaScript keeps it).
const trimBody = JSON.stringify({ model: "m", messages: [{ role: "user", content: "\ufeffHello\u0085" }] });

test("4. llama3 and gemma3 `| trim`: Python's str.strip keeps U+FEFF and strips U+0085", async () => {
  const llama = await firstPrompt("llama3_1", trimBody);
  assert.ok(llama.includes("<|start_header_id|>user<|end_header_id|>\n\n\ufeffHello<|eot_id|>"), JSON.stringify(llama));
  const gemma = await firstPrompt("gemma3", trimBody);
  assert.ok(gemma.includes("<start_of_turn>user\n\ufeffHello<end_of_turn>"), JSON.stringify(gemma));
});

test("5. deepseek_v3: the second tool round after ns.is_output_first went false writes '\\n<｜tool▁output▁begin｜>'", async () => {
  const r = await rig("deepseek_v3");
  const id = await session(r);
  const messages: unknown[] = [
    { role: "system", content: "Use tools." },
    { role: "user", content: "Go." },
  ];
  const turn = async () => {
    const res = await send(r, id, JSON.stringify({ model: "m", messages }));
    assert.is(res.status, 200, text(res));
    messages.push(json<{ choices: [{ message: unknown }] }>(res).choices[0].message);
  };
  await turn();
  messages.push({ role: "tool", content: "first result" });
  await turn();
  messages.push({ role: "tool", content: "second result" });
  await turn();
  const records = json<SessionBody>(await r.core.get(id)).records;
  const prompt = r.folder.decode(records[2]!.request.input_ids);
  assert.is(prompt.split("<｜tool▁outputs▁begin｜>").length - 1, 1, prompt);
  assert.ok(
    prompt.endsWith("\n<｜tool▁output▁begin｜>second result<｜tool▁output▁end｜><｜tool▁outputs▁end｜>"),
    prompt,
  );
});

test("6. deepseek_v3: a mid-session system message (the template moves every one to the top) is a 400 saying why", async () => {
  const r = await rig("deepseek_v3");
  const id = await session(r);
  const first = [{ role: "user", content: "Hi." }];
  const res = await send(r, id, JSON.stringify({ model: "m", messages: first }));
  assert.is(res.status, 200, text(res));
  const reply = json<{ choices: [{ message: unknown }] }>(res).choices[0].message;
  const late = await send(
    r,
    id,
    JSON.stringify({ model: "m", messages: [...first, reply, { role: "system", content: "Be brief." }] }),
  );
  assert.is(late.status, 400, text(late));
  const body = json<{ error: string; code?: string }>(late);
  assert.match(
    body.error,
    /role 'system'.*moves it elsewhere, e\.g\. to the top.*found by rendering the template at startup/,
  );
  assert.equal(json<SessionBody>(await r.core.get(id)).records.length, 1, "nothing kept of the refused turn");
});

test("6. the drift report locates a special_token_count finding: its segment and the message", () => {
  const folder = npmFolder("deepseek_v3");
  const family = selectFamily(folder);
  const renderer = promptContext(folder, family).renderer;
  const messages = [
    { role: "user", content: "Hi." },
    { role: "assistant", content: "Hello." },
    { role: "system", content: "Be brief." },
  ];
  const options = { addGenerationPrompt: false };
  const canonical = renderer.render(messages, options);
  // What appending the system message at the end gave: its text after the turns, no bos-side system prompt.
  const appended = renderer.render(messages.slice(0, 2), options) + "Be brief.";
  const found = compareTrajectories(
    folder,
    family,
    folder.encode(canonical),
    folder.encode(appended),
    messageLocator(renderer, messages, options, canonical),
  );
  assert.equal(
    found.map((m) => [m.type, m.message_index]),
    [["special_token_count", 2]],
  );
  assert.ok(found[0]!.segment_index >= 0);
  assert.ok(
    found[0]!.expected_text.includes("Be brief.") || found[0]!.actual_text.includes("Be brief."),
    JSON.stringify(found),
  );
});

test.run();
