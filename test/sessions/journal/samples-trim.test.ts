// Training samples of a family whose boundary drops the last id of a checkpoint (GLM: the
// stop token is also the next message's opener). A turn's completion keeps its stop token
// when the next prompt wrote the same id again, and loses it (loss mask 0, turn end one
// earlier) when the next prompt put another opener there; no more than max_trim ids may go.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { buildSample } from "../../../sessions/journal/samples.ts";
import type { TurnRecord } from "../../../sessions/journal/records.ts";
import { Checkpoints } from "../../../sessions/checkpoints.ts";

const OBSERVATION = 90;
const USER = 91;

/** A /generate record: the prompt ids sent and the completion ids with their logprobs. */
function record(promptLength: number, completion: readonly number[], logprobs: readonly number[]): TurnRecord {
  const reply = JSON.stringify({
    text: "x",
    meta_info: {
      finish_reason: { type: "stop" },
      output_token_logprobs: completion.map((id, i) => [logprobs[i], id, null]),
    },
  });
  return {
    timestamp: 0,
    method: "POST",
    path: "/generate",
    statusCode: 200,
    request: Buffer.from(JSON.stringify({ input_ids: Array.from({ length: promptLength }, () => 1) })),
    response: [Buffer.from(reply)],
  };
}

/**
 * Turn 0: prompt [1,2,3], completion [11,12,OBSERVATION]. Turn 1's prompt drops the stop id
 * and appends `opener` + [30,31]; its completion is [13,USER].
 */
function session(opener: number): { turns: Checkpoints; second: number[]; records: TurnRecord[] } {
  const first = [1, 2, 3, 11, 12, OBSERVATION];
  const prompt2 = [...first.slice(0, -1), opener, 30, 31];
  const turns = new Checkpoints();
  turns.push(first.slice(0, 3), first.slice(3));
  turns.push(prompt2, [13, USER]);
  return {
    turns,
    second: [...prompt2, 13, USER],
    records: [record(3, [11, 12, OBSERVATION], [-1, -2, -3]), record(prompt2.length, [13, USER], [-4, -5])],
  };
}

test("a stop id the next prompt replaced is cut from its turn: loss mask 0, the turn ends before it", () => {
  const { turns, second, records } = session(USER);
  const sample = buildSample("s", turns, records, undefined, 1);
  assert.equal(sample.tokens, second);
  // Response = tokens after the first prompt: 11 12 USER 30 31 13 USER.
  assert.equal([...sample.lossMask], [1, 1, 0, 0, 0, 1, 1]);
  assert.equal(sample.logProbs, [-1, -2, 0, 0, 0, -4, -5]);
  assert.equal(sample.turns, [
    { prompt_start: 0, completion_start: 3, completion_end: 5, finish_reason: "stop", weight_version: null },
    { prompt_start: 5, completion_start: 8, completion_end: 10, finish_reason: "stop", weight_version: null },
  ]);
  assert.is(sample.status, "completed");
});

test("a stop id the next prompt wrote again stays the turn's own (greedy match)", () => {
  const { turns, records } = session(OBSERVATION);
  const sample = buildSample("s", turns, records, undefined, 1);
  assert.equal([...sample.lossMask], [1, 1, 1, 0, 0, 1, 1]);
  assert.equal(sample.logProbs, [-1, -2, -3, 0, 0, -4, -5]);
  assert.equal(
    sample.turns.map((t) => [t.prompt_start, t.completion_end]),
    [
      [0, 6],
      [6, 10],
    ],
  );
});

test("without a trim allowance a replaced id is an inconsistent session", () => {
  const { turns, records } = session(USER);
  assert.throws(() => buildSample("s", turns, records), /turn 1 leaves out 1 ids of turn 0, at most 0 may be/);
  // Two ids left out is more than max_trim 1 allows.
  const broken = new Checkpoints();
  broken.push([1, 2, 3], [11, 12, OBSERVATION]);
  broken.push([1, 2, 3, 11, 77, USER, 30, 31], [13, USER]);
  assert.throws(() => buildSample("s", broken, records, undefined, 1), /leaves out 2 ids of turn 0/);
});

test("max_seq_len counts a cut turn by where it ends in the sample", () => {
  const { turns, records } = session(USER);
  // 5 tokens: all of turn 0 the sample keeps (its stop id is not in the sample), nothing of turn 1.
  const five = buildSample("s", turns, records, 5, 1);
  assert.equal(five.tokens, [1, 2, 3, 11, 12]);
  assert.equal(five.turns, [
    { prompt_start: 0, completion_start: 3, completion_end: 5, finish_reason: "stop", weight_version: null },
  ]);
  assert.is(five.status, "truncated");
  // 9 tokens: turn 1 cut inside its completion.
  const nine = buildSample("s", turns, records, 9, 1);
  assert.equal(nine.turns[1], {
    prompt_start: 5,
    completion_start: 8,
    completion_end: 9,
    finish_reason: "stop",
    weight_version: null,
    truncated: true,
  });
});

test.run();
