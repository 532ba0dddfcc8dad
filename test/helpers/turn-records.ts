// Reading a session's records back as token ids, whatever the engine API: the prompt the
// engine was sent, and the completion ids and logprobs it answered with; and the check
// every multi-turn test makes of them: each prompt extends the previous prompt plus its
// completion, and the samples hold the engine's completions and logprobs.
import * as assert from "uvu/assert";
import type { SampleBody } from "./bodies.ts";
import { call } from "./server.ts";

export interface RawRecord {
  path: string;
  request: { input_ids?: number[]; prompt?: number[]; messages?: unknown[] };
  response: {
    meta_info?: { output_token_logprobs: [number, number][]; routed_experts?: string };
    choices?: {
      token_ids?: number[];
      logprobs?: { token_logprobs: number[] } | null;
      meta_info?: { output_token_logprobs: [number, number][] };
    }[];
  };
}

export interface TurnIds {
  prompt: number[];
  completion: number[];
  logprobs: number[];
}

export function recordIds(r: RawRecord): TurnIds {
  const prompt = r.request.input_ids ?? r.request.prompt!;
  const entries =
    r.response.meta_info?.output_token_logprobs ?? r.response.choices?.[0]?.meta_info?.output_token_logprobs;
  if (entries) return { prompt, completion: entries.map((e) => e[1]), logprobs: entries.map((e) => e[0]) };
  const choice = r.response.choices![0]!;
  return { prompt, completion: choice.token_ids!, logprobs: choice.logprobs!.token_logprobs };
}

/** The session's turns as ids, after checking each prompt extends the one before plus its completion, and the samples. */
export async function exactTrajectory(base: string, id: string, turns: number): Promise<TurnIds[]> {
  const got = await call<{ records: RawRecord[]; metadata: { accumulated_token_ids: number[] } }>(
    base,
    "GET",
    `/sessions/${id}`,
  );
  assert.is(got.json.records.length, turns);
  const ids = got.json.records.map(recordIds);
  for (let i = 1; i < ids.length; i++) {
    const [before, now] = [ids[i - 1]!, ids[i]!];
    const extended = [...before.prompt, ...before.completion];
    assert.equal(now.prompt.slice(0, extended.length), extended, `turn ${i} extends turn ${i - 1} exactly`);
  }
  const last = ids[ids.length - 1]!;
  assert.equal(got.json.metadata.accumulated_token_ids, [...last.prompt, ...last.completion]);
  const sample = await call<SampleBody>(base, "POST", `/sessions/${id}/samples`, {});
  assert.is(sample.status, 200, sample.text);
  assert.is(sample.json.turns.length, turns);
  const first = sample.json.tokens.length - sample.json.response_length;
  for (const [i, r] of ids.entries()) {
    const turn = sample.json.turns[i]!;
    assert.equal(sample.json.tokens.slice(turn.completion_start, turn.completion_end), r.completion);
    const logprobs = sample.json.rollout_log_probs.slice(turn.completion_start - first, turn.completion_end - first);
    assert.equal(logprobs, r.logprobs);
  }
  return ids;
}
