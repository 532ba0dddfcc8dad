// The wire forms of a tree-mode session's samples (docs/trajectories.md): the per-leaf list
// as one safetensors file (the JSON list is tree-samples.ts, from sample-encode.ts's
// objects), and the tree-packed sample as JSON or safetensors. It encodes; it never
// computes a sample.
import { encodeSafetensors, type Tensor } from "../journal/safetensors.ts";
import type { Sample } from "../journal/samples.ts";
import type { EncodedSample } from "../journal/sample-encode.ts";

/** One token tree of the chosen leaves: every array is aligned with `tokens`. */
export interface PackedSample {
  sessionId: string;
  /** The chosen leaves' node ids, in the order their paths were packed. */
  leaves: string[];
  tokens: number[];
  /** Each token's parent token index; -1 at a root. */
  parent: number[];
  /** How many chosen leaves pass through each token. */
  leafCount: number[];
  lossMask: number[];
  logProbs: number[];
  /** Per leaf, the index of its path's last token (-1 for an empty path). */
  leafEnds: number[];
  /**
   * Routed experts, one row per token (`rows` = tokens), when every chosen leaf's sample has
   * them: a token's row is the first leaf's (in `leaves` order) that has one for it; a row
   * no leaf has (a leaf's last token, which the engine never ran) is all -1.
   */
  routedExperts?: { data: Int32Array; rows: number; width: number };
}

export function packedJson(p: PackedSample): EncodedSample {
  const text =
    `{"session_id":${JSON.stringify(p.sessionId)},"packed":true,"leaves":${JSON.stringify(p.leaves)},` +
    `"tokens":${JSON.stringify(p.tokens)},"parent":${JSON.stringify(p.parent)},` +
    `"leaf_count":${JSON.stringify(p.leafCount)},"loss_mask":${JSON.stringify(p.lossMask)},` +
    `"rollout_log_probs":${JSON.stringify(p.logProbs)},"leaf_ends":${JSON.stringify(p.leafEnds)}`;
  const routed = p.routedExperts;
  if (!routed) return { contentType: "application/json", body: [Buffer.from(`${text}}`)] };
  const rows: number[][] = [];
  for (let r = 0; r < routed.rows; r++) rows.push([...routed.data.subarray(r * routed.width, (r + 1) * routed.width)]);
  return {
    contentType: "application/json",
    body: [Buffer.from(text), Buffer.from(`,"rollout_routed_experts":${JSON.stringify(rows)}}`)],
  };
}

/**
 * Tensors `tokens` (I64 [n]), `parent`, `leaf_count` (I32 [n]), `rollout_log_probs` (F32
 * [n]), `rollout_routed_experts` (I32 [n, width], when present), `leaf_ends` (I32
 * [leaves]), `loss_mask` (U8 [n]); `__metadata__`: session_id, packed "true", leaves (JSON).
 */
export function packedSafetensors(p: PackedSample): EncodedSample {
  const n = p.tokens.length;
  const tensors: Record<string, Tensor> = {
    tokens: { dtype: "I64", shape: [n], data: BigInt64Array.from(p.tokens, (t) => BigInt(t)) },
    parent: { dtype: "I32", shape: [n], data: Int32Array.from(p.parent) },
    leaf_count: { dtype: "I32", shape: [n], data: Int32Array.from(p.leafCount) },
    rollout_log_probs: { dtype: "F32", shape: [n], data: Float32Array.from(p.logProbs) },
    ...(p.routedExperts && {
      rollout_routed_experts: {
        dtype: "I32" as const,
        shape: [p.routedExperts.rows, p.routedExperts.width],
        data: p.routedExperts.data,
      },
    }),
    leaf_ends: { dtype: "I32", shape: [p.leafEnds.length], data: Int32Array.from(p.leafEnds) },
    loss_mask: { dtype: "U8", shape: [n], data: Uint8Array.from(p.lossMask) },
  };
  const metadata = { session_id: p.sessionId, packed: "true", leaves: JSON.stringify(p.leaves) };
  return { contentType: "application/octet-stream", body: encodeSafetensors(tensors, metadata) };
}

/**
 * The per-leaf samples as one file: for each leaf `<node>.tokens` (I64), then
 * `<node>.rollout_log_probs` (F32), `<node>.rollout_routed_experts` (I32, when present),
 * then `<node>.loss_mask` (U8): the tensors of journal/sample-encode.ts's single sample,
 * named by leaf, wider dtypes first. `__metadata__`: session_id, leaves (JSON), and per
 * leaf `<node>.status`, `<node>.response_length`, `<node>.turns` (JSON).
 */
export function samplesSafetensors(sessionId: string, leaves: readonly string[], samples: readonly Sample[]) {
  const tensors: Record<string, Tensor> = {};
  const metadata: Record<string, string> = { session_id: sessionId, leaves: JSON.stringify(leaves) };
  samples.forEach((s, i) => {
    const leaf = leaves[i]!;
    tensors[`${leaf}.tokens`] = {
      dtype: "I64",
      shape: [s.tokens.length],
      data: BigInt64Array.from(s.tokens, (t) => BigInt(t)),
    };
    metadata[`${leaf}.status`] = s.status;
    metadata[`${leaf}.response_length`] = String(s.responseLength);
    metadata[`${leaf}.turns`] = JSON.stringify(s.turns);
  });
  samples.forEach((s, i) => {
    const leaf = leaves[i]!;
    tensors[`${leaf}.rollout_log_probs`] = {
      dtype: "F32",
      shape: [s.responseLength],
      data: Float32Array.from(s.logProbs),
    };
    const routed = s.routedExperts;
    if (routed)
      tensors[`${leaf}.rollout_routed_experts`] = {
        dtype: "I32",
        shape: [routed.rows, routed.width],
        data: routed.data,
      };
  });
  samples.forEach((s, i) => {
    tensors[`${leaves[i]!}.loss_mask`] = { dtype: "U8", shape: [s.responseLength], data: s.lossMask };
  });
  return { contentType: "application/octet-stream", body: encodeSafetensors(tensors, metadata) };
}
