// Training samples from the session core against real engines (the simulated one, and
// an SGLang-shaped routed-experts engine): every array is checked against the session's
// own records (GET), which the sample must agree with token for token.
import { coreFor } from "../../helpers/core.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { JournalRecordStore, type CoreResponse, type SessionCore } from "../../../sessions/index.ts";
import { startSimEngine, type SimEngine } from "../../../server/sim-engine/sim-engine.ts";
import { startR3Engine, type R3Engine } from "../../fixtures/r3-engine.ts";
import type { AssistantMessage, SampleBody, SampleTurnBody, SessionRecord, WireMessage } from "../../helpers/bodies.ts";
import { readSafetensors } from "../../helpers/safetensors.ts";
import { qwen3, WEATHER_TOOL } from "../fixtures.ts";

const folder = qwen3();
const NL = folder.encode("\n")[0]!;
const IM_END = folder.tokenId("<|im_end|>")!;
const WIDTH = 128; // routed-experts values per token (e.g. 64 layers x top-2)
let engine: SimEngine;
let r3: R3Engine;
let core: SessionCore;
let r3Core: SessionCore;

const bytes = (r: CoreResponse) => (Array.isArray(r.body) ? Buffer.concat(r.body) : (r.body as Buffer));
const json = (r: CoreResponse) => JSON.parse(bytes(r).toString("utf8"));
const req = (body: unknown, query = "", headers: Record<string, string> = {}) => ({
  method: "POST",
  path: "/",
  query,
  headers: { "content-type": "application/json", ...headers },
  body: Buffer.from(typeof body === "string" ? body : JSON.stringify(body)),
});

async function turn(c: SessionCore, id: string, messages: WireMessage[]): Promise<AssistantMessage> {
  const r = await c.chat(id, req({ model: "m", messages, tools: [WEATHER_TOOL] }));
  assert.is(r.status, 200, bytes(r).toString());
  return json(r).choices[0].message;
}

async function sample(c: SessionCore, id: string, body: unknown = "", query = ""): Promise<SampleBody> {
  const r = await c.samples(id, req(body, query));
  assert.is(r.status, 200, bytes(r).toString());
  assert.is(r.headers["content-type"], "application/json");
  return json(r);
}

/** Tokens, mask and logprobs as the records say they must be (the spec, written independently). */
function expectedFromRecords(records: SessionRecord[]) {
  const first = records[0].request.input_ids.length;
  const mask: number[] = [];
  const logprobs: number[] = [];
  const turns: SampleTurnBody[] = [];
  let end = 0;
  let tokens: number[] = [];
  for (const rec of records) {
    const input: number[] = rec.request.input_ids;
    const entries: [number, number][] = rec.response.choices[0].meta_info.output_token_logprobs;
    assert.equal(input.slice(0, end), tokens, "each prompt extends the previous turn");
    for (let p = Math.max(end, first); p < input.length; p++) {
      mask.push(0);
      logprobs.push(0);
    }
    for (const [lp] of entries) {
      mask.push(1);
      logprobs.push(lp);
    }
    turns.push({
      prompt_start: end,
      completion_start: input.length,
      completion_end: input.length + entries.length,
      finish_reason: rec.response.choices[0].finish_reason,
      weight_version: rec.weight_version,
    });
    tokens = [...input, ...entries.map((e) => e[1])];
    end = tokens.length;
  }
  return { tokens, mask, logprobs, turns, first };
}

/** A tool loop with a rollback: 4 surviving turns (tool call, text, tool call, text). */
async function toolLoopWithRollback(c: SessionCore): Promise<string> {
  const id = json(await c.create()).session_id;
  const messages: WireMessage[] = [
    { role: "system", content: "You are a weather bot." },
    { role: "user", content: "What is the weather in Paris?" },
  ];
  const a0 = await turn(c, id, messages);
  assert.ok(a0.tool_calls?.length, "turn 0 calls the tool");
  messages.push(a0, { role: "tool", tool_call_id: a0.tool_calls[0].id, content: '{"temp_c": 21}' });
  messages.push(await turn(c, id, messages));
  // The agent retries the tool: same history up to the call, another result -> turn 1 rolls back.
  messages.splice(3, 2, { role: "tool", tool_call_id: a0.tool_calls[0].id, content: '{"temp_c": 19, "retry": true}' });
  messages.push(await turn(c, id, messages));
  messages.push({ role: "user", content: "And in Rome?" });
  const a2 = await turn(c, id, messages);
  assert.ok(a2.tool_calls?.length, "turn 2 calls the tool");
  messages.push(a2, { role: "tool", tool_call_id: a2.tool_calls[0].id, content: '{"temp_c": 25}' });
  messages.push(await turn(c, id, messages));
  return id;
}

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: folder });
  r3 = await startR3Engine(folder, WIDTH);
  core = coreFor({ engineUrl: engine.url, tokenizerFolder: folder, allowedAppendRoles: ["tool", "user"] });
  r3Core = coreFor({ engineUrl: r3.url, tokenizerFolder: folder, routingReplay: true });
});

test.after(async () => {
  await core.close();
  await r3Core.close();
  await engine.close();
  await r3.close();
});

test("a tool loop with a rollback: tokens, loss mask, logprobs and turns agree with the records", async () => {
  const id = await toolLoopWithRollback(core);
  const got = json(await core.get(id));
  assert.is(got.records.length, 4, "the rolled-back turn left no record");
  assert.ok(JSON.stringify(got.records[1].request).includes('\\"retry\\": true'), "record 1 is the retried turn");
  const want = expectedFromRecords(got.records);
  const s = await sample(core, id);
  assert.is(s.session_id, id);
  assert.is(s.status, "completed");
  assert.equal(s.tokens, want.tokens);
  assert.equal(s.tokens, got.metadata.accumulated_token_ids);
  assert.is(s.response_length, want.tokens.length - want.first);
  assert.equal(s.loss_mask, want.mask);
  assert.equal(s.rollout_log_probs, want.logprobs);
  assert.equal(s.turns, want.turns);
  assert.equal(
    s.turns.map((t) => t.finish_reason),
    ["tool_calls", "stop", "tool_calls", "stop"],
  );
  assert.not.ok("rollout_routed_experts" in s, "no routing replay, no routed experts");
  for (const t of s.turns.slice(1)) {
    // The newline the server put after the model's <|im_end|> is not the model's: mask 0.
    assert.is(s.tokens[t.prompt_start - 1], IM_END);
    assert.is(s.tokens[t.prompt_start], NL);
    assert.is(s.loss_mask[t.prompt_start - want.first], 0);
    assert.is(s.loss_mask[t.completion_start - want.first], 1);
  }
  for (let i = 0; i < s.response_length; i++)
    assert.is(s.rollout_log_probs[i] !== 0, s.loss_mask[i] === 1, `logprob at ${i} iff generated`);
  // An empty body and {} are the same request.
  assert.equal(await sample(core, id, "{}"), s);
  assert.equal(await sample(core, id, { max_seq_len: s.tokens.length }), s);
  await core.delete(id);
});

test("max_seq_len truncates at turn boundaries: the overflowing turn is cut, later turns dropped", async () => {
  const id = await toolLoopWithRollback(core);
  const full = await sample(core, id);
  const [t0, t1, t2] = full.turns;
  const first = t0.completion_start;

  // Inside turn 1's completion: turn 1 cut there, turns 2 and 3 gone.
  const n1 = t1.completion_start + 2;
  const a = await sample(core, id, { max_seq_len: n1 });
  assert.is(a.status, "truncated");
  assert.equal(a.tokens, full.tokens.slice(0, n1));
  assert.is(a.response_length, n1 - first);
  assert.equal(a.loss_mask, full.loss_mask.slice(0, n1 - first));
  assert.equal(a.rollout_log_probs, full.rollout_log_probs.slice(0, n1 - first));
  assert.equal(a.turns, [t0, { ...t1, completion_end: n1, truncated: true }]);

  // Inside turn 2's prompt (user + generation prompt, nothing generated): ends at turn 1's end.
  const b = await sample(core, id, { max_seq_len: t2.completion_start - 1 });
  assert.is(b.status, "truncated");
  assert.equal(b.tokens, full.tokens.slice(0, t1.completion_end));
  assert.equal(b.turns, [t0, t1]);
  assert.is(b.loss_mask.length, t1.completion_end - first);

  // Shorter than the first prompt: no response at all.
  const c = await sample(core, id, { max_seq_len: 5 });
  assert.equal(
    [c.status, c.tokens, c.response_length, c.loss_mask, c.rollout_log_probs, c.turns],
    ["truncated", full.tokens.slice(0, 5), 0, [], [], []],
  );
  await core.delete(id);
});

test("safetensors (by ?format= or Accept) reads back as the JSON sample's arrays", async () => {
  const id = await toolLoopWithRollback(core);
  const s = await sample(core, id, { max_seq_len: 200 });
  for (const r of [
    await core.samples(id, req({ max_seq_len: 200 }, "format=safetensors")),
    await core.samples(id, req({ max_seq_len: 200 }, "", { accept: "application/octet-stream" })),
  ]) {
    assert.is(r.status, 200);
    assert.is(r.headers["content-type"], "application/octet-stream");
    const { tensors, metadata } = readSafetensors(bytes(r));
    assert.equal(Object.keys(tensors).sort(), ["loss_mask", "rollout_log_probs", "tokens"]);
    assert.equal(tensors.tokens, { dtype: "I64", shape: [s.tokens.length], values: s.tokens });
    assert.equal(tensors.loss_mask, { dtype: "U8", shape: [s.response_length], values: s.loss_mask });
    assert.equal(tensors.rollout_log_probs, {
      dtype: "F32",
      shape: [s.response_length],
      values: s.rollout_log_probs.map(Math.fround),
    });
    assert.equal(metadata, {
      session_id: id,
      status: s.status,
      response_length: String(s.response_length),
      turns: JSON.stringify(s.turns),
    });
  }
  await core.delete(id);
});

test("bad requests are 400, unknown sessions 404", async () => {
  const id = json(await core.create()).session_id;
  const cases: Array<[unknown, string, string]> = [
    ["{nope", "", "invalid JSON body: "],
    [[1], "", "samples request body must be a JSON object"],
    [{ max_seq_length: 10 }, "", "unknown key in samples request: max_seq_length (allowed: max_seq_len)"],
    [{ max_seq_len: 0 }, "", "max_seq_len must be a positive integer, got 0"],
    [{ max_seq_len: 1.5 }, "", "max_seq_len must be a positive integer, got 1.5"],
    [{ max_seq_len: "9" }, "", 'max_seq_len must be a positive integer, got "9"'],
    ["", "format=xml", 'format must be json or safetensors, got "xml"'],
  ];
  for (const [body, query, message] of cases) {
    const r = await core.samples(id, req(body, query));
    assert.is(r.status, 400, `${JSON.stringify(body)} ${query}`);
    assert.ok(json(r).error.startsWith(message), json(r).error);
  }
  // A session without turns is an empty, complete sample.
  assert.equal(await sample(core, id), {
    session_id: id,
    status: "completed",
    response_length: 0,
    tokens: [],
    loss_mask: [],
    rollout_log_probs: [],
    turns: [],
    oldest_weight_version: null,
  });
  await core.delete(id);
  const gone = await core.samples(id, req(""));
  assert.is(gone.status, 404);
  assert.equal(json(gone), { error: `session not found: session_id=${id}`, code: "TITO_ERR_SESSION_NOT_FOUND" });
});

test("journal store: records read back from disk give the same sample, also after a restart (replay)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tito-samples-journal-"));
  const open = async () => {
    const c = coreFor({
      engineUrl: engine.url,
      tokenizerFolder: folder,
      allowedAppendRoles: ["tool", "user"],
      recordStore: await JournalRecordStore.open({ dir }),
    });
    await c.recover();
    return c;
  };
  let journaled = await open();
  try {
    const memId = await toolLoopWithRollback(core);
    const id = await toolLoopWithRollback(journaled);
    const want = { ...(await sample(core, memId, { max_seq_len: 300 })), session_id: id };
    assert.equal(
      await sample(journaled, id, { max_seq_len: 300 }),
      want,
      "the same deterministic loop, memory vs journal",
    );
    await journaled.close();
    journaled = await open();
    assert.equal(await sample(journaled, id, { max_seq_len: 300 }), want, "after replay");
    await core.delete(memId);
  } finally {
    await journaled.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("routed experts: the last turn's payload, decoded to rows of int32 per token, cut with the tokens", async () => {
  const id = json(await r3Core.create()).session_id;
  const messages: WireMessage[] = [{ role: "user", content: "Weather in Oslo?" }];
  const a0 = await turn(r3Core, id, messages);
  messages.push(a0, { role: "tool", tool_call_id: a0.tool_calls![0].id, content: '{"temp_c": 3}' });
  await turn(r3Core, id, messages);
  const got = json(await r3Core.get(id));
  const s = await sample(r3Core, id);
  const rows = s.tokens.length - 1;
  assert.is(s.rollout_routed_experts!.length, rows);
  assert.ok(s.rollout_routed_experts!.every((row: number[]) => row.length === WIDTH));
  // Independently decoded from the record: the second request's payload, row-major.
  const raw = Buffer.from(got.records[1].response.choices[0].meta_info.routed_experts, "base64");
  assert.ok(raw.length > 64 * 1024, "a payload big enough to arrive in several chunks");
  const flat = Array.from({ length: raw.length / 4 }, (_, i) => raw.readInt32LE(i * 4));
  assert.equal(s.rollout_routed_experts!.flat(), flat);
  assert.is(s.rollout_routed_experts![rows - 1][WIDTH - 1], r3.value(1, rows - 1, WIDTH - 1));

  // Cut inside turn 0's completion: turn 0's payload, one row per kept token but the last.
  const n = s.turns[0].completion_start + 3;
  const cut = await sample(r3Core, id, { max_seq_len: n });
  assert.is(cut.rollout_routed_experts!.length, n - 1);
  assert.equal(
    cut.rollout_routed_experts![n - 2],
    Array.from({ length: WIDTH }, (_, c) => r3.value(0, n - 2, c)),
  );

  const st = readSafetensors(bytes(await r3Core.samples(id, req({ max_seq_len: n }, "format=safetensors"))));
  assert.equal(st.tensors.rollout_routed_experts, {
    dtype: "I32",
    shape: [n - 1, WIDTH],
    values: cut.rollout_routed_experts!.flat(),
  });
  await r3Core.delete(id);
});

test("routed experts written with escaped slashes decode the same; a misaligned payload is a 502", async () => {
  r3.mode.escapeSlashes = true;
  const id = json(await r3Core.create()).session_id;
  try {
    await turn(r3Core, id, [{ role: "user", content: "Weather in Lima?" }]);
  } finally {
    r3.mode.escapeSlashes = false;
  }
  const got = json(await r3Core.get(id));
  const raw = Buffer.from(got.records[0].response.choices[0].meta_info.routed_experts, "base64");
  assert.equal(
    (await sample(r3Core, id)).rollout_routed_experts!.flat(),
    Array.from({ length: raw.length / 4 }, (_, i) => raw.readInt32LE(i * 4)),
  );

  r3.mode.misaligned = true;
  const bad = json(await r3Core.create()).session_id;
  try {
    await turn(r3Core, bad, [{ role: "user", content: "Weather in Quito?" }]);
  } finally {
    r3.mode.misaligned = false;
  }
  const r = await r3Core.samples(bad, req(""));
  assert.is(r.status, 502);
  assert.match(
    json(r).error,
    /^routed_experts of turn 0 holds \d+ int32 values, not a whole number of rows for the \d+ tokens it covers/,
  );
  await r3Core.delete(id);
  await r3Core.delete(bad);
});

test.run();
