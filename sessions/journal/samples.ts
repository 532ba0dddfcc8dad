// A session's trajectory as one training sample (POST /sessions/{id}/samples): the
// linear token sequence of the committed turns (rollbacks already removed the branches
// that lost), a loss mask and the engine's logprobs over the response, per-turn spans,
// and the routed experts of the last turn, optionally truncated at max_seq_len; encoded
// as JSON or safetensors. Token structure comes from the checkpoints, logprobs and
// finish reasons from the records; the two are checked against each other. It reads a
// snapshot taken under the session lock and never changes session state.
import assert from "node:assert";
import { InvalidSampleRequestError, SampleDataError } from "../errors.ts";
import { countInputIds, scanReplyFacts } from "./record-scan.ts";
import { requestBytes, versionRuns, type TurnRecord } from "./records.ts";
import type { CheckpointView } from "../checkpoints.ts";

export interface SampleRequest {
  maxSeqLen?: number;
  format: "json" | "safetensors";
  /** `?token_text=1`: the JSON sample also carries each token's decoded text (the viewer's strip). */
  tokenText?: boolean;
  /** `leaves`, `drop_retries`, `packed` as given: a tree-mode session's choice (sessions/tree/tree-samples.ts checks them). */
  tree?: { leaves?: unknown; drop_retries?: unknown; packed?: unknown };
}

export interface SampleTurn {
  /** Token index where the turn's prompt part starts (the end of the previous turn). */
  prompt_start: number;
  completion_start: number;
  completion_end: number;
  finish_reason: string | null;
  /** The policy version current when the turn was sent (docs/rl-loop.md); null when none was set. */
  weight_version: string | null;
  /** The engine's own `meta_info.weight_version`, when it reported one. */
  engine_weight_version?: string;
  /** Present (true) on the one turn max_seq_len cut short. */
  truncated?: true;
  /** A resumed turn (docs/rl-loop.md, "Partial rollouts"): its oldest and newest policy version. */
  min_weight_version?: string | null;
  max_weight_version?: string | null;
  /** A resumed turn: which policy sampled which of its tokens, as runs [start, end) of sample positions. */
  weight_versions?: Array<{ weight_version: string | null; start: number; end: number }>;
}

export interface Sample {
  sessionId: string;
  status: "completed" | "truncated";
  tokens: number[];
  /** Tokens after the first prompt; loss mask and logprobs cover exactly these. */
  responseLength: number;
  lossMask: Uint8Array;
  logProbs: number[];
  turns: SampleTurn[];
  /** The first listed turn's weight_version: turns are sent in order, so it is the stalest one. */
  oldestWeightVersion: string | null;
  /** Rows = tokens - 1 (SGLang returns routing for every token but the last generated one). */
  routedExperts?: { data: Int32Array; rows: number; width: number };
}

const BODY_KEYS = ["max_seq_len"];
const TREE_KEYS = ["leaves", "drop_retries", "packed"];

/** Body `{"max_seq_len": N}` (optional); `?format=json|safetensors`, else Accept decides. */
export function parseSampleRequest(
  body: Buffer,
  query: string,
  headers: Record<string, string | string[] | undefined>,
): SampleRequest {
  const request: SampleRequest = { format: "json" };
  const text = body.toString("utf8").trim();
  if (text) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      throw new InvalidSampleRequestError(`invalid JSON body: ${(err as Error).message}`);
    }
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed))
      throw new InvalidSampleRequestError("samples request body must be a JSON object");
    const unknown = Object.keys(parsed).filter((k) => !BODY_KEYS.includes(k) && !TREE_KEYS.includes(k));
    if (unknown.length > 0)
      throw new InvalidSampleRequestError(
        `unknown key in samples request: ${unknown.join(", ")} (allowed: max_seq_len); a tree-mode session also takes ${TREE_KEYS.join(", ")}`,
      );
    const tree = Object.entries(parsed).filter(([k]) => TREE_KEYS.includes(k));
    if (tree.length > 0) request.tree = Object.fromEntries(tree);
    const max = (parsed as { max_seq_len?: unknown }).max_seq_len;
    if (max !== undefined && max !== null) {
      if (!Number.isSafeInteger(max) || (max as number) < 1)
        throw new InvalidSampleRequestError(`max_seq_len must be a positive integer, got ${JSON.stringify(max)}`);
      request.maxSeqLen = max as number;
    }
  }
  const format = new URLSearchParams(query).get("format");
  if (format !== null) {
    if (format !== "json" && format !== "safetensors")
      throw new InvalidSampleRequestError(`format must be json or safetensors, got ${JSON.stringify(format)}`);
    request.format = format;
  } else {
    const accept = String(headers.accept ?? "");
    if (accept.includes("application/octet-stream")) request.format = "safetensors";
  }
  const tokenText = new URLSearchParams(query).get("token_text");
  if (tokenText !== null) {
    if (tokenText !== "1" && tokenText !== "0")
      throw new InvalidSampleRequestError(`token_text must be 1 or 0, got ${JSON.stringify(tokenText)}`);
    if (tokenText === "1" && request.format !== "json")
      throw new InvalidSampleRequestError("token_text=1 needs the JSON format (the safetensors file has no texts)");
    request.tokenText = tokenText === "1";
  }
  return request;
}

/** Where the sample ends under max_seq_len: the token count and the last turn (partly) kept. */
function cutPoint(
  turns: CheckpointView,
  ends: readonly number[],
  maxSeqLen: number | undefined,
): { length: number; lastTurn: number; cut: boolean } {
  const total = turns.count === 0 ? 0 : ends[turns.count - 1]!;
  if (maxSeqLen === undefined || total <= maxSeqLen) return { length: total, lastTurn: turns.count - 1, cut: false };
  const k = ends.findIndex((end) => end > maxSeqLen);
  // Some of the overflowing turn's completion fits, or it is the first prompt itself: cut inside it.
  if (turns.promptLengthOf(k) < maxSeqLen || k === 0) return { length: maxSeqLen, lastTurn: k, cut: true };
  // Only its prompt would fit (tool/user tokens, nothing generated): end at the previous turn.
  return { length: ends[k - 1]!, lastTurn: k - 1, cut: false };
}

/**
 * Where each turn ends in the sample's tokens: the last turn's checkpoint in full; an
 * earlier one as far as it agrees with it, which may leave out up to `maxTrimTokens` of
 * its completion's last ids (a GLM stop token the next prompt replaced). Matched
 * greedily: a stop token the next prompt wrote again stays the turn's own.
 */
function turnEnds(sessionId: string, turns: CheckpointView, maxTrimTokens: number): number[] {
  const last = turns.count - 1;
  return Array.from({ length: turns.count }, (_, k) => {
    const length = turns.lengthOf(k);
    if (k === last) return length;
    const diff = firstDifference(turns, k, last, 0, length);
    const end = diff === -1 ? length : diff;
    assert.ok(
      end >= length - maxTrimTokens,
      `session ${sessionId}: turn ${k + 1} leaves out ${length - end} ids of turn ${k}, at most ${maxTrimTokens} may be`,
    );
    return end;
  });
}

export function buildSample(
  sessionId: string,
  turns: CheckpointView,
  records: readonly TurnRecord[],
  maxSeqLen?: number,
  maxTrimTokens = 0,
): Sample {
  assert.equal(records.length, turns.count, `session ${sessionId}: ${records.length} records for ${turns.count} turns`);
  const last = turns.count - 1;
  const fullLength = turns.count === 0 ? 0 : turns.lengthOf(last);
  const ends = turnEnds(sessionId, turns, maxTrimTokens);
  const { length, lastTurn, cut } = cutPoint(turns, ends, maxSeqLen);
  const firstPrompt = turns.count === 0 ? 0 : Math.min(turns.promptLengthOf(0), length);
  const responseLength = length - firstPrompt;
  const lossMask = new Uint8Array(responseLength);
  const logProbs = new Array<number>(responseLength).fill(0);
  const sampleTurns: SampleTurn[] = [];
  let previousEnd = 0;
  let routed: (() => Buffer) | undefined;
  for (let k = 0; k <= lastTurn; k++) {
    const promptLength = turns.promptLengthOf(k);
    // Each prompt extends the previous turn as far as the sample keeps it (prompt-builder.ts builds it so).
    assert.equal(
      firstDifference(turns, k, last, 0, previousEnd),
      -1,
      `session ${sessionId}: turn ${k} does not extend turn ${k - 1}`,
    );
    const facts = resumedFacts(records[k]!, scanReplyFacts(records[k]!.response, k));
    const inputIds = countInputIds(requestBytes(records[k]!), k) - facts.resumedIds;
    assert.equal(
      inputIds,
      promptLength,
      `session ${sessionId}: record ${k} sent ${inputIds} input_ids, its turn has ${promptLength}`,
    );
    assert.equal(
      facts.completionIds.length,
      turns.lengthOf(k) - promptLength,
      `session ${sessionId}: record ${k} completion length`,
    );
    assert.equal(
      facts.completionIds.findIndex((id, i) => id !== turns.idAt(k, promptLength + i)),
      -1,
      `session ${sessionId}: record ${k} completion tokens`,
    );
    const end = Math.min(ends[k]!, length);
    const start = Math.min(promptLength, end);
    for (let p = start; p < end; p++) {
      lossMask[p - firstPrompt] = 1;
      logProbs[p - firstPrompt] = facts.logprobs[p - promptLength]!;
    }
    // A turn whose whole completion max_seq_len cut away is not listed.
    if (end > start || end === ends[k]) {
      const record = records[k]!;
      const entry: SampleTurn = {
        prompt_start: previousEnd,
        completion_start: start,
        completion_end: end,
        finish_reason: facts.finishReason,
        weight_version: record.weightVersion ?? null,
      };
      if (record.engineWeightVersion !== undefined) entry.engine_weight_version = record.engineWeightVersion;
      if (end < ends[k]!) entry.truncated = true;
      if (record.resumed) addRuns(entry, versionRuns(record.resumed), promptLength, end);
      sampleTurns.push(entry);
    }
    previousEnd = ends[k]!;
    routed = facts.routedExperts;
  }
  const sample: Sample = {
    sessionId,
    status: cut || length < fullLength ? "truncated" : "completed",
    tokens: turns.count === 0 ? [] : turns.ids(last, length),
    responseLength,
    lossMask,
    logProbs,
    turns: sampleTurns,
    oldestWeightVersion: sampleTurns[0]?.weight_version ?? null,
  };
  // The last kept turn's payload covers every earlier token too: it alone is the sample's.
  if (routed)
    sample.routedExperts = routedRows(routed(), turns.lengthOf(lastTurn) - 1, Math.max(0, length - 1), lastTurn);
  return sample;
}

/** A resumed record's reply facts with the aborted parts' ids and logprobs in front (records.ts). */
function resumedFacts<F extends { completionIds: number[]; logprobs: number[] }>(
  record: TurnRecord,
  facts: F,
): F & { resumedIds: number } {
  const parts = record.resumed?.parts ?? [];
  if (parts.length === 0) return { ...facts, resumedIds: 0 };
  const ids = parts.flatMap((p) => p.completionIds);
  return {
    ...facts,
    completionIds: [...ids, ...facts.completionIds],
    logprobs: [...parts.flatMap((p) => p.logprobs), ...facts.logprobs],
    resumedIds: ids.length,
  };
}

/** A resumed turn's version runs at sample positions (completion from `start`), cut at `end`. */
function addRuns(entry: SampleTurn, runs: Array<[string | null, number]>, start: number, end: number): void {
  entry.min_weight_version = runs[0]?.[0] ?? null;
  entry.max_weight_version = runs.at(-1)?.[0] ?? null;
  entry.weight_versions = [];
  let at = start;
  for (const [version, n] of runs) {
    const to = Math.min(at + n, end);
    if (to > at) entry.weight_versions.push({ weight_version: version, start: at, end: to });
    at += n;
  }
}

/** The first index in [from, to) where checkpoints a and b differ, or -1 (one assert per check, not per token). */
function firstDifference(turns: CheckpointView, a: number, b: number, from: number, to: number): number {
  for (let i = from; i < to; i++) if (turns.idAt(a, i) !== turns.idAt(b, i)) return i;
  return -1;
}

/** The payload of turn k as rows of int32: it covers that turn's tokens but the last. */
function routedRows(
  bytes: Buffer,
  coveredRows: number,
  keepRows: number,
  turn: number,
): { data: Int32Array; rows: number; width: number } {
  if (bytes.length % 4 !== 0)
    throw new SampleDataError(
      `routed_experts of turn ${turn} is ${bytes.length} bytes, not a whole number of int32 values`,
    );
  const values = bytes.length / 4;
  if (coveredRows === 0 || values % coveredRows !== 0) {
    throw new SampleDataError(
      `routed_experts of turn ${turn} holds ${values} int32 values, not a whole number of rows for the ${coveredRows} tokens it covers (prompt + completion - 1)`,
    );
  }
  const width = values / coveredRows;
  const data = new Int32Array(bytes.buffer, bytes.byteOffset, values).subarray(0, keepRows * width);
  return { data, rows: keepRows, width };
}
