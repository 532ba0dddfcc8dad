// The two wire forms of a training sample (samples.ts): JSON (the default) and
// safetensors. Large arrays are written as a list of chunks, never one giant string:
// routed experts can be millions of values. It encodes; it never computes a sample.
import type { Sample, SampleTurn } from "./samples.ts";
import { encodeSafetensors, type Tensor } from "./safetensors.ts";

/** The JSON form, as `POST /sessions/{id}/samples` returns it and `server.samples()` resolves. */
export interface TrainingSample {
  session_id: string;
  status: "completed" | "truncated";
  response_length: number;
  tokens: number[];
  /** Over the response: 1 for engine-generated tokens, 0 for everything the server or client added. */
  loss_mask: number[];
  /** Over the response: the engine's logprob of each generated token, 0 elsewhere. */
  rollout_log_probs: number[];
  turns: SampleTurn[];
  /** The weight version of the first turn (the stalest; turns are sent in order), null when it has none. */
  oldest_weight_version: string | null;
  /** tokens.length - 1 rows of int32 (layers x top-k per token), when routing replay was on. */
  rollout_routed_experts?: number[][];
  /** With `?token_text=1`: each of `tokens` decoded alone (session-summary.ts tokenTexts). */
  token_texts?: string[];
}

export interface EncodedSample {
  contentType: string;
  body: Buffer[];
}

// Rows of routed experts per JSON chunk: bounds the size of one string.
const ROWS_PER_CHUNK = 4096;

function routedJsonChunks(data: Int32Array, rows: number, width: number): Buffer[] {
  const chunks: Buffer[] = [];
  for (let r0 = 0; r0 < rows; r0 += ROWS_PER_CHUNK) {
    const parts: string[] = [];
    for (let r = r0; r < Math.min(rows, r0 + ROWS_PER_CHUNK); r++)
      parts.push(`[${data.subarray(r * width, (r + 1) * width).join(",")}]`);
    chunks.push(Buffer.from((r0 > 0 ? "," : "") + parts.join(",")));
  }
  return chunks;
}

/** `{"session_id", "status", "response_length", "tokens", "loss_mask", "rollout_log_probs", "turns", "oldest_weight_version"[, "token_texts"][, "rollout_routed_experts"]}`. */
export function sampleJson(sample: Sample, tokenTexts?: readonly string[]): EncodedSample {
  const head =
    `{"session_id":${JSON.stringify(sample.sessionId)},"status":${JSON.stringify(sample.status)},` +
    `"response_length":${sample.responseLength},"tokens":${JSON.stringify(sample.tokens)},` +
    `"loss_mask":[${sample.lossMask.join(",")}],"rollout_log_probs":${JSON.stringify(sample.logProbs)},` +
    `"turns":${JSON.stringify(sample.turns)},"oldest_weight_version":${JSON.stringify(sample.oldestWeightVersion)}`;
  const body: Buffer[] = [Buffer.from(head)];
  if (tokenTexts) body.push(Buffer.from(`,"token_texts":${JSON.stringify(tokenTexts)}`));
  const routed = sample.routedExperts;
  if (routed) {
    body.push(Buffer.from(`,"rollout_routed_experts":[`));
    body.push(...routedJsonChunks(routed.data, routed.rows, routed.width));
    body.push(Buffer.from("]"));
  }
  body.push(Buffer.from("}"));
  return { contentType: "application/json", body };
}

/**
 * Tensors `tokens` (I64 [n]), `rollout_log_probs` (F32 [response_length]),
 * `rollout_routed_experts` (I32 [n - 1, width], when present), `loss_mask` (U8
 * [response_length]); `__metadata__` holds session_id, status, response_length,
 * turns (JSON) and oldest_weight_version (when there is one), all as strings.
 */
export function sampleSafetensors(sample: Sample): EncodedSample {
  const tensors: Record<string, Tensor> = {
    tokens: { dtype: "I64", shape: [sample.tokens.length], data: BigInt64Array.from(sample.tokens, (t) => BigInt(t)) },
    rollout_log_probs: { dtype: "F32", shape: [sample.responseLength], data: Float32Array.from(sample.logProbs) },
  };
  const routed = sample.routedExperts;
  if (routed) tensors.rollout_routed_experts = { dtype: "I32", shape: [routed.rows, routed.width], data: routed.data };
  tensors.loss_mask = { dtype: "U8", shape: [sample.responseLength], data: sample.lossMask };
  const metadata = {
    session_id: sample.sessionId,
    status: sample.status,
    response_length: String(sample.responseLength),
    turns: JSON.stringify(sample.turns),
    // Metadata values are strings: absent when no turn has a version.
    ...(sample.oldestWeightVersion === null ? {} : { oldest_weight_version: sample.oldestWeightVersion }),
  };
  return { contentType: "application/octet-stream", body: encodeSafetensors(tensors, metadata) };
}
