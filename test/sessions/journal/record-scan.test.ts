// Reading training-sample facts from stored records of each engine API (SGLang chat, SGLang
// /generate, vLLM /v1/completions), written by hand, whole and cut into chunks at every
// kind of place (inside keys, numbers, strings and base64); and a sample built from them.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { countInputIds, scanReplyFacts, type ReplyFacts } from "../../../sessions/journal/record-scan.ts";
import { buildSample } from "../../../sessions/journal/samples.ts";
import type { TurnRecord } from "../../../sessions/journal/records.ts";
import { Checkpoints } from "../../../sessions/checkpoints.ts";
import { SampleDataError } from "../../../sessions/errors.ts";

const ROUTED = Buffer.from(Int32Array.from({ length: 48 }, (_, i) => i * 1000 - 7).buffer);
const B64 = ROUTED.toString("base64");

/** The same bytes whole, and cut every n bytes for several n (1 included). */
function chunkings(text: string): Buffer[][] {
  const bytes = Buffer.from(text);
  const out: Buffer[][] = [[bytes]];
  for (const n of [1, 2, 3, 7, 64]) {
    const parts: Buffer[] = [];
    for (let i = 0; i < bytes.length; i += n) parts.push(bytes.subarray(i, i + n));
    out.push(parts);
  }
  return out;
}

function factsOf(text: string, turn = 0): Omit<ReplyFacts, "routedExperts"> & { routed?: Buffer } {
  let first: ReturnType<typeof factsOf> | undefined;
  for (const chunks of chunkings(text)) {
    const { routedExperts, ...facts } = scanReplyFacts(chunks, turn);
    const got = routedExperts ? { ...facts, routed: routedExperts() } : facts;
    if (first) assert.equal(got, first, `${chunks.length} chunks read like one`);
    first ??= got;
  }
  return first!;
}

const sglangChat = JSON.stringify({
  id: "x",
  object: "chat.completion",
  choices: [
    {
      index: 0,
      message: { role: "assistant", content: 'say "meta_info": {}' },
      logprobs: { content: [{ token: "Hi", logprob: -0.5, top_logprobs: [] }] },
      finish_reason: "stop",
      meta_info: {
        finish_reason: { type: "stop", matched: 7 },
        output_token_logprobs: [
          [-0.5, 11, null],
          [-0.25, 12, null],
          [null, 7, null],
        ],
        routed_experts: B64,
      },
    },
  ],
  usage: { prompt_tokens: 4, completion_tokens: 3 },
});

const sglangGenerate = JSON.stringify({
  text: 'a "choices": [] b<|im_end|>',
  output_ids: [11, 12, 7],
  meta_info: {
    id: "r1",
    finish_reason: { type: "length", length: 3 },
    prompt_tokens: 4,
    completion_tokens: 3,
    output_token_logprobs: [
      [-0.5, 11, null],
      [-0.25, 12, null],
      [-1.5e-3, 7, null],
    ],
    routed_experts: B64,
  },
});

const vllmCompletions = JSON.stringify({
  id: "cmpl-1",
  object: "text_completion",
  choices: [
    {
      index: 0,
      text: 'a "meta_info" b',
      token_ids: [11, 12, 7],
      logprobs: { text_offset: [0, 1, 2], token_logprobs: [-0.5, null, -0.125], tokens: ["a", "b", "c"] },
      finish_reason: "stop",
      stop_reason: null,
    },
  ],
  usage: { prompt_tokens: 4, completion_tokens: 3 },
});

test("SGLang chat (today's shape): choices[0] and its meta_info", () => {
  assert.equal(factsOf(sglangChat), {
    completionIds: [11, 12, 7],
    logprobs: [-0.5, -0.25, 0],
    finishReason: "stop",
    routed: ROUTED,
  });
});

test("SGLang /generate: meta_info at the top level, finish reason from its type", () => {
  assert.equal(factsOf(sglangGenerate), {
    completionIds: [11, 12, 7],
    logprobs: [-0.5, -0.25, -1.5e-3],
    finishReason: "length",
    routed: ROUTED,
  });
  const bare = JSON.stringify({ text: "", meta_info: { output_token_logprobs: [], finish_reason: null } });
  assert.equal(factsOf(bare), { completionIds: [], logprobs: [], finishReason: null });
});

test("vLLM /v1/completions: choices[0].token_ids and logprobs.token_logprobs (null -> 0), no routing", () => {
  assert.equal(factsOf(vllmCompletions), {
    completionIds: [11, 12, 7],
    logprobs: [-0.5, 0, -0.125],
    finishReason: "stop",
  });
  const length = vllmCompletions.replace('"finish_reason":"stop"', '"finish_reason":"length"');
  assert.is(factsOf(length).finishReason, "length");
});

function refusal(text: string, message: string | RegExp) {
  for (const chunks of chunkings(text)) {
    try {
      scanReplyFacts(chunks, 2);
    } catch (err) {
      assert.instance(err, SampleDataError);
      if (typeof message === "string") assert.is((err as Error).message, message);
      else assert.match((err as Error).message, message);
      continue;
    }
    assert.unreachable(`no error for ${text}`);
  }
}

test("a reply without completion ids or logprobs: a SampleDataError naming what is missing", () => {
  const noIds =
    'record of turn 2 has no completion ids in its reply: no meta_info.output_token_logprobs (SGLang chat or /generate), no choices[0].token_ids and no "token_id:N" choices[0].logprobs.tokens (vLLM completions)';
  refusal(JSON.stringify({ text: "hi", meta_info: { finish_reason: { type: "stop" } } }), noIds);
  refusal(JSON.stringify({ choices: [{ message: { content: "hi" }, finish_reason: "stop" }] }), noIds);
  refusal(JSON.stringify({ choices: [] }), noIds);
  refusal(
    JSON.stringify({ choices: [{ text: "hi", token_ids: [1, 2], logprobs: null }] }),
    "record of turn 2 has completion ids but no choices[0].logprobs.token_logprobs in its reply",
  );
  refusal(
    JSON.stringify({ choices: [{ token_ids: [1, 2], logprobs: { token_logprobs: [-1] } }] }),
    "record of turn 2: choices[0].logprobs.token_logprobs is not a list of 2 logprobs, one per token id",
  );
  // A null token_ids (a streamed record, or vLLM before 0.10.2) reads the "token_id:N" tokens instead.
  refusal(JSON.stringify({ choices: [{ token_ids: null, logprobs: { token_logprobs: [] } }] }), noIds);
  refusal(
    JSON.stringify({ choices: [{ token_ids: "1,2", logprobs: { token_logprobs: [] } }] }),
    "record of turn 2: choices[0].token_ids is not a list of token ids",
  );
  refusal(
    JSON.stringify({
      choices: [{ token_ids: null, logprobs: { tokens: ["token_id:1", "hi"], token_logprobs: [-1, -1] } }],
    }),
    'record of turn 2: choices[0].logprobs.tokens[1] is "hi", not "token_id:N"',
  );
});

test("countInputIds: input_ids (SGLang), or a prompt list (vLLM); a text prompt or none is refused", () => {
  const count = (body: unknown) => countInputIds(Buffer.from(JSON.stringify(body)), 3);
  assert.is(count({ model: "m", messages: [{ role: "user", content: "[1,2]" }], input_ids: [1, 2, 3, 4] }), 4);
  assert.is(count({ input_ids: [1, 2, 3], return_logprob: true, sampling_params: { max_new_tokens: 8 } }), 3);
  assert.is(count({ model: "m", prompt: [5, 6, 7, 8, 9], max_tokens: 8, return_token_ids: true }), 5);
  assert.is(count({ prompt: [] }), 0);
  for (const [body, message] of [
    [
      { prompt: "Hello" },
      "record of turn 3 has a text prompt in its request, not token ids (no input_ids, prompt is not a list)",
    ],
    [
      { model: "m", messages: [] },
      "record of turn 3 has no prompt ids in its request (neither input_ids nor a prompt list)",
    ],
  ] as const) {
    try {
      count(body);
      assert.unreachable("no error");
    } catch (err) {
      assert.instance(err, SampleDataError);
      assert.is((err as Error).message, message);
    }
  }
});

/** Two turns of one session: prompt 0..3, completion, tool ids, completion. */
function session(): Checkpoints {
  const turns = new Checkpoints();
  turns.push([1, 2, 3, 4], [11, 12, 7]);
  turns.push([1, 2, 3, 4, 11, 12, 7, 99, 20, 21, 22], [13, 7]);
  return turns;
}

function record(request: unknown, reply: string): TurnRecord {
  const chunks = chunkings(reply)[4]!; // 7-byte chunks
  return {
    timestamp: 0,
    method: "POST",
    path: "/",
    statusCode: 200,
    request: Buffer.from(JSON.stringify(request)),
    response: chunks,
  };
}

test("a sample from /generate records: ids, loss mask, logprobs, turns and routed experts", () => {
  const turns = session();
  const reply2 = JSON.stringify({
    text: "x",
    meta_info: {
      finish_reason: { type: "stop", matched: 7 },
      output_token_logprobs: [
        [-1, 13, null],
        [-2, 7, null],
      ],
      routed_experts: Buffer.from(Int32Array.from({ length: 12 * 2 }, (_, i) => i).buffer).toString("base64"),
    },
  });
  const sample = buildSample("s", turns, [
    record({ input_ids: [1, 2, 3, 4] }, sglangGenerate),
    record({ input_ids: turns.ids(1, 11) }, reply2),
  ]);
  assert.equal(sample.tokens, turns.ids(1));
  assert.equal([...sample.lossMask], [1, 1, 1, 0, 0, 0, 0, 1, 1]);
  assert.equal(sample.logProbs, [-0.5, -0.25, -1.5e-3, 0, 0, 0, 0, -1, -2]);
  assert.equal(
    sample.turns.map((t) => t.finish_reason),
    ["length", "stop"],
  );
  assert.equal(sample.routedExperts && [sample.routedExperts.rows, sample.routedExperts.width], [12, 2]);
});

test("a sample from vLLM records: the prompt list counts as input ids; no routed experts", () => {
  const turns = session();
  const reply2 = JSON.stringify({
    choices: [{ text: "x", token_ids: [13, 7], logprobs: { token_logprobs: [-1, null] }, finish_reason: "stop" }],
  });
  const sample = buildSample("s", turns, [
    record({ prompt: [1, 2, 3, 4] }, vllmCompletions),
    record({ prompt: turns.ids(1, 11) }, reply2),
  ]);
  assert.equal(sample.tokens, turns.ids(1));
  assert.equal([...sample.lossMask], [1, 1, 1, 0, 0, 0, 0, 1, 1]);
  assert.equal(sample.logProbs, [-0.5, 0, -0.125, 0, 0, 0, 0, -1, 0]);
  assert.equal(sample.turns, [
    { prompt_start: 0, completion_start: 4, completion_end: 7, finish_reason: "stop", weight_version: null },
    { prompt_start: 7, completion_start: 11, completion_end: 13, finish_reason: "stop", weight_version: null },
  ]);
  assert.is(sample.routedExperts, undefined);
});

test.run();
