// Training samples of a tree-mode session (POST /sessions/{id}/samples; docs/trajectories.md):
// one sample per chosen leaf, each built along its root-to-leaf path exactly as a linear
// session's (journal/samples.ts buildSample: the engine's ids, logprobs and routing rows),
// or, with `packed`, one tree-packed sample holding every token once with its parent token
// and the number of chosen leaves through it, so a trainer weights shared tokens instead of
// training them once per leaf. It reads a snapshot taken under the session lock.
import type { CheckpointView } from "../checkpoints.ts";
import { InvalidSampleRequestError } from "../errors.ts";
import type { TurnRecord } from "../journal/records.ts";
import { buildSample, type parseSampleRequest, type Sample } from "../journal/samples.ts";
import { sampleJson } from "../journal/sample-encode.ts";
import type { PromptContext } from "../prompt-builder.ts";
import { tokenTexts } from "../session-summary.ts";
import type { Trajectory } from "../trajectory.ts";
import { packedJson, packedSafetensors, samplesSafetensors, type PackedSample } from "./tree-encode.ts";
import { TrajectoryTree, type TreeNode } from "./tree.ts";

export interface TreeSampleChoice {
  leaves: "all" | "latest" | string[];
  dropRetries: boolean;
  packed: boolean;
}

/** The tree keys of a samples body (absent: every leaf, retries kept, one sample per leaf). */
export function treeChoice(
  keys: { leaves?: unknown; drop_retries?: unknown; packed?: unknown } = {},
): TreeSampleChoice {
  const { leaves = "all", drop_retries = false, packed = false } = keys;
  const list = Array.isArray(leaves) && leaves.every((id) => typeof id === "string");
  if (leaves !== "all" && leaves !== "latest" && !list)
    throw new InvalidSampleRequestError(
      `leaves must be "all", "latest" or a list of node ids, got ${JSON.stringify(leaves)}`,
    );
  if (typeof drop_retries !== "boolean")
    throw new InvalidSampleRequestError(`drop_retries must be a boolean, got ${JSON.stringify(drop_retries)}`);
  if (typeof packed !== "boolean")
    throw new InvalidSampleRequestError(`packed must be a boolean, got ${JSON.stringify(packed)}`);
  return { leaves: leaves as TreeSampleChoice["leaves"], dropRetries: drop_retries, packed };
}

/** The nodes whose paths become samples, in creation order. */
export function chooseLeaves(tree: TrajectoryTree, choice: TreeSampleChoice): TreeNode[] {
  let chosen: TreeNode[];
  if (Array.isArray(choice.leaves)) {
    chosen = choice.leaves.map((id) => {
      const node = tree.get(id);
      if (!node) throw new InvalidSampleRequestError(`leaves names ${JSON.stringify(id)}, not a node of the session`);
      return node;
    });
  } else chosen = tree.leaves();
  if (choice.dropRetries) {
    // A node a later retry superseded, and everything under it, is left out.
    const superseded = tree.superseded();
    chosen = chosen.filter((leaf) => TrajectoryTree.path(leaf).every((n) => !superseded.has(n.id)));
  }
  if (choice.leaves === "latest") chosen = chosen.slice(-1);
  return chosen;
}

/** A root-to-node path as the checkpoints buildSample reads. */
class PathView implements CheckpointView {
  constructor(readonly path: readonly TreeNode[]) {}
  get count(): number {
    return this.path.length;
  }
  lengthOf(k: number): number {
    return this.path[k]!.ids.length;
  }
  promptLengthOf(k: number): number {
    return this.path[k]!.promptLength;
  }
  idAt(k: number, i: number): number {
    return this.path[k]!.ids.at(i);
  }
  ids(k: number, end?: number): number[] {
    return this.path[k]!.ids.slice(end);
  }
}

export function leafSamples(
  sessionId: string,
  tree: TrajectoryTree,
  records: readonly TurnRecord[],
  leaves: readonly TreeNode[],
  maxSeqLen: number | undefined,
  maxTrimTokens: number,
): Sample[] {
  return leaves.map((leaf) => {
    const path = TrajectoryTree.path(leaf);
    const view = new PathView(path);
    return buildSample(
      sessionId,
      view,
      path.map((n) => records[n.index]!),
      maxSeqLen,
      maxTrimTokens,
    );
  });
}

/**
 * The chosen leaves' samples as one token tree: a token is shared when its whole prefix,
 * its id, loss mask and logprob are the same (the same node's tokens always are).
 */
export function packSamples(sessionId: string, leafIds: readonly string[], samples: readonly Sample[]): PackedSample {
  const packed: PackedSample = {
    sessionId,
    leaves: [...leafIds],
    tokens: [],
    parent: [],
    leafCount: [],
    lossMask: [],
    logProbs: [],
    leafEnds: [],
  };
  const index = new Map<string, number>();
  for (const sample of samples) {
    const prompt = sample.tokens.length - sample.responseLength;
    let at = -1;
    sample.tokens.forEach((token, i) => {
      const mask = i < prompt ? 0 : sample.lossMask[i - prompt]!;
      const logProb = i < prompt ? 0 : sample.logProbs[i - prompt]!;
      const key = `${at},${token},${mask},${logProb}`;
      let k = index.get(key);
      if (k === undefined) {
        k = packed.tokens.length;
        index.set(key, k);
        packed.tokens.push(token);
        packed.parent.push(at);
        packed.leafCount.push(0);
        packed.lossMask.push(mask);
        packed.logProbs.push(logProb);
      }
      packed.leafCount[k]!++;
      at = k;
    });
    packed.leafEnds.push(at);
  }
  const routed = packedRouting(packed, samples);
  if (routed) packed.routedExperts = routed;
  return packed;
}

/**
 * The packed tokens' routed experts (PackedSample.routedExperts), when every sample has
 * them with one row width: walks each sample's path through the packed tree again (from its
 * leaf end, by `parent`) and fills each token's row from the first sample that has one.
 */
function packedRouting(packed: PackedSample, samples: readonly Sample[]): PackedSample["routedExperts"] {
  const width = samples[0]?.routedExperts?.width;
  if (width === undefined || !samples.every((s) => s.routedExperts?.width === width)) return undefined;
  const rows = packed.tokens.length;
  const data = new Int32Array(rows * width).fill(-1);
  const filled = new Uint8Array(rows);
  samples.forEach((sample, i) => {
    const own = sample.routedExperts!;
    const path: number[] = [];
    for (let k = packed.leafEnds[i]!; k !== -1; k = packed.parent[k]!) path.push(k);
    path.reverse();
    for (let j = 0; j < Math.min(path.length, own.rows); j++) {
      const k = path[j]!;
      if (filled[k]) continue;
      data.set(own.data.subarray(j * width, (j + 1) * width), k * width);
      filled[k] = 1;
    }
  });
  return { data, rows, width };
}

export function encodeTreeSamples(
  ctx: PromptContext,
  t: Trajectory,
  tree: TrajectoryTree,
  records: readonly TurnRecord[],
  request: ReturnType<typeof parseSampleRequest>,
) {
  const choice = treeChoice(request.tree);
  const leaves = chooseLeaves(tree, choice);
  const samples = leafSamples(t.id, tree, records, leaves, request.maxSeqLen, ctx.family.maxTrimTokens);
  const ids = leaves.map((n) => n.id);
  if (choice.packed) {
    if (request.tokenText) throw new InvalidSampleRequestError("token_text=1 is not available with packed");
    const packed = packSamples(t.id, ids, samples);
    return request.format === "safetensors" ? packedSafetensors(packed) : packedJson(packed);
  }
  if (request.format === "safetensors") return samplesSafetensors(t.id, ids, samples);
  const body: Buffer[] = [Buffer.from(`{"session_id":${JSON.stringify(t.id)},"samples":[`)];
  samples.forEach((sample, i) => {
    const chunks = sampleJson(sample, request.tokenText ? tokenTexts(ctx.folder, sample.tokens) : undefined).body;
    // Each sample's object with its leaf's id first.
    body.push(Buffer.from(`${i > 0 ? "," : ""}{"leaf":${JSON.stringify(ids[i])},`), chunks[0]!.subarray(1));
    body.push(...chunks.slice(1));
  });
  body.push(Buffer.from("]}"));
  return { contentType: "application/json", body };
}
