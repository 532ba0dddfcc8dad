// The drift report (`tito_session_mismatch`, docs/architecture.md "The token algorithm"): compares a
// session's token ids with a canonical re-render of its messages, segment by segment
// at special tokens. It reports drift; it never "fixes" ids by re-tokenizing them.
import type { TitoFamily } from "./families/index.ts";
import type { TokenizerFolder } from "./tokenizer-folder.ts";

export type MismatchType = "special_token_count" | "special_token_type" | "assistant_text" | "non_assistant_text";

export interface Mismatch {
  type: MismatchType;
  segment_index: number;
  expected_text: string;
  actual_text: string;
  detail: string;
  /** Where the segment lies in the session's token ids (absent for special_token_count): [token_start, token_end). */
  token_start?: number;
  token_end?: number;
}

interface Segment {
  special: boolean;
  ids: number[];
  /** Index of the segment's first id in the ids it was cut from. */
  start: number;
}

function stripTrailing(ids: readonly number[], trailing: ReadonlySet<number>): readonly number[] {
  let end = ids.length;
  while (end > 0 && trailing.has(ids[end - 1]!)) end--;
  return end === ids.length ? ids : ids.slice(0, end);
}

/** Each special token is its own segment; runs of ordinary tokens are content segments. */
function segmentsOf(ids: readonly number[], special: ReadonlySet<number>): Segment[] {
  const out: Segment[] = [];
  let run: number[] | undefined;
  ids.forEach((id, start) => {
    if (special.has(id)) {
      run = undefined;
      out.push({ special: true, ids: [id], start });
    } else if (run) {
      run.push(id);
    } else {
      run = [id];
      out.push({ special: false, ids: run, start });
    }
  });
  return out;
}

/** The segment's place in the actual ids, which the viewer marks (docs/viewer.md). */
const span = (s: Segment) => ({ token_start: s.start, token_end: s.start + s.ids.length });

const pattern = (segments: Segment[]) => segments.map((s) => (s.special ? "S" : "c")).join("");

/**
 * `expected`: ids of the canonical re-render; `actual`: the session's accumulated ids.
 * An empty list means no drift.
 */
export function compareTrajectories(
  folder: TokenizerFolder,
  family: TitoFamily,
  expected: readonly number[],
  actual: readonly number[],
): Mismatch[] {
  const special = family.driftSpecialIds ?? folder.specialTokenIds;
  const exp = segmentsOf(stripTrailing(expected, family.trailingTokenIds), special);
  const act = segmentsOf(stripTrailing(actual, family.trailingTokenIds), special);
  if (exp.length !== act.length || pattern(exp) !== pattern(act)) {
    const count = (s: Segment[]) => s.filter((x) => x.special).length;
    return [
      {
        type: "special_token_count",
        segment_index: -1,
        expected_text: "",
        actual_text: "",
        detail: `expected ${exp.length} segments with ${count(exp)} special tokens, actual ${act.length} segments with ${count(act)} special tokens`,
      },
    ];
  }
  const out: Mismatch[] = [];
  for (let i = 0; i < exp.length; i++) {
    const e = exp[i]!;
    const a = act[i]!;
    if (e.special) {
      if (e.ids[0] !== a.ids[0]) {
        out.push({
          type: "special_token_type",
          segment_index: i,
          expected_text: folder.decode(e.ids),
          actual_text: folder.decode(a.ids),
          detail: `special token ${e.ids[0]} expected, ${a.ids[0]} found`,
          ...span(a),
        });
      }
      continue;
    }
    const expectedText = folder.decode(e.ids);
    const actualText = folder.decode(a.ids);
    if (expectedText === actualText) continue;
    const prev = i > 0 ? exp[i - 1]!.ids[0] : undefined;
    const assistant = family.isAssistantSegment(prev, expectedText) && family.isAssistantSegment(prev, actualText);
    out.push({
      type: assistant ? "assistant_text" : "non_assistant_text",
      segment_index: i,
      expected_text: expectedText,
      actual_text: actualText,
      detail: assistant
        ? "assistant text differs from its canonical re-render (expected where the template re-renders history)"
        : "non-assistant text differs from its canonical re-render",
      ...span(a),
    });
  }
  return out;
}
