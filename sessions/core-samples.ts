// A session's committed turns and records as one encoded training sample (POST
// /sessions/{id}/samples; samples.ts builds it, sample-encode.ts writes it). Called by the
// session core under the session's lock, so turns and records are of the same state.
import { InvalidSampleRequestError } from "./errors.ts";
import { sampleJson, sampleSafetensors } from "./journal/sample-encode.ts";
import { buildSample, type parseSampleRequest } from "./journal/samples.ts";
import type { RecordStore } from "./journal/records.ts";
import type { PromptContext } from "./prompt-builder.ts";
import { tokenTexts } from "./session-summary.ts";
import type { Trajectory } from "./trajectory.ts";

export function encodeSample(
  ctx: PromptContext,
  t: Trajectory,
  records: Awaited<ReturnType<RecordStore["list"]>>,
  request: ReturnType<typeof parseSampleRequest>,
) {
  if (request.tree)
    throw new InvalidSampleRequestError(
      `${Object.keys(request.tree).join(", ")}: only a tree-mode session takes them (docs/trajectories.md)`,
    );
  const sample = buildSample(t.id, t.checkpoints, records, request.maxSeqLen, ctx.family.maxTrimTokens);
  if (request.format === "safetensors") return sampleSafetensors(sample);
  return sampleJson(sample, request.tokenText ? tokenTexts(ctx.folder, sample.tokens) : undefined);
}
