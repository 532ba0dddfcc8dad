// The drift report (`tito_session_mismatch`, docs/architecture.md "The token algorithm"): compares a
// session's token ids with a canonical re-render of its messages, segment by segment
// at special tokens. It reports drift; it never "fixes" ids by re-tokenizing them.
import { joinTextParts, type ChatMessage, type ChatRenderer, type RenderOptions } from "./chat-template.ts";
import type { TitoFamily } from "./families/index.ts";
import { renderOrThrow, type PromptContext } from "./prompt-builder.ts";
import type { TokenizerFolder } from "./tokenizer-folder.ts";

export type MismatchType = "special_token_count" | "special_token_type" | "assistant_text" | "non_assistant_text";

export interface Mismatch {
  type: MismatchType;
  segment_index: number;
  /**
   * special_token_count: the message whose rendering holds the first differing segment (the
   * first message whose render, with the messages before it, reaches that point of the
   * canonical render), or -1 when none does. Absent on the other types.
   */
  message_index?: number;
  expected_text: string;
  actual_text: string;
  detail: string;
  /** Where the segment lies in the session's token ids (absent for special_token_count): [token_start, token_end). */
  token_start?: number;
  token_end?: number;
}

/** The message a point of the canonical render (a character offset into its text) belongs to, or -1. */
export type MessageLocator = (textOffset: number) => number;

/**
 * A locator over the canonical render `full` of `messages`: the first k whose render of
 * messages[0..k] reaches past the point and agrees with `full` up to it (a message moved to
 * the top, like a system message some templates collect there, is found where it lands).
 * Renders only when a finding needs a location.
 */
export function messageLocator(
  renderer: ChatRenderer,
  messages: readonly ChatMessage[],
  options: RenderOptions,
  full: string,
): MessageLocator {
  return (offset) => {
    for (let k = 0; k < messages.length; k++) {
      let text: string;
      try {
        const head = messages.slice(0, k + 1);
        text = renderer.render(renderer.contentFormat === undefined ? joinTextParts(head) : head, options);
      } catch {
        continue;
      }
      if (text.length > offset && text.slice(0, offset + 1) === full.slice(0, offset + 1)) return k;
    }
    return -1;
  };
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

const count = (s: Segment[]) => s.filter((x) => x.special).length;

/** Whether two segments are the same kind and, for special tokens, the same token. */
const sameKind = (a: Segment, b: Segment) => a.special === b.special && (!a.special || a.ids[0] === b.ids[0]);

/**
 * A special_token_count finding located: the first segment where the two differ in kind (a
 * special token against text, another special token, or one side ended), its text on both
 * sides, and the message of the canonical render it falls in (`locate`).
 */
function countMismatch(folder: TokenizerFolder, exp: Segment[], act: Segment[], locate?: MessageLocator): Mismatch {
  let i = 0;
  while (i < exp.length && i < act.length && sameKind(exp[i]!, act[i]!)) i++;
  const text = (s: Segment | undefined) => (s === undefined ? "" : folder.decode(s.ids));
  const before = exp.slice(0, i).flatMap((s) => s.ids);
  const messageIndex = locate ? locate(folder.decode(before).length) : -1;
  return {
    type: "special_token_count",
    segment_index: i,
    message_index: messageIndex,
    expected_text: text(exp[i]),
    actual_text: text(act[i]),
    detail:
      `expected ${exp.length} segments with ${count(exp)} special tokens, actual ${act.length} segments with ${count(act)} special tokens; ` +
      `they first differ at segment ${i}` +
      (messageIndex >= 0 ? `, in the rendering of message ${messageIndex}` : ""),
  };
}

/**
 * `expected`: ids of the canonical re-render; `actual`: the session's accumulated ids;
 * `locate`: maps a point of the canonical render to its message (for special_token_count).
 * An empty list means no drift.
 */
export function compareTrajectories(
  folder: TokenizerFolder,
  family: TitoFamily,
  expected: readonly number[],
  actual: readonly number[],
  locate?: MessageLocator,
): Mismatch[] {
  const special = family.driftSpecialIds ?? folder.specialTokenIds;
  const exp = segmentsOf(stripTrailing(expected, family.trailingTokenIds), special);
  const act = segmentsOf(stripTrailing(actual, family.trailingTokenIds), special);
  if (exp.length !== act.length || pattern(exp) !== pattern(act)) return [countMismatch(folder, exp, act, locate)];
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

/** A session's drift report: its ids against a fresh render of its messages, special_token_count findings located. */
export function driftOf(
  ctx: Pick<PromptContext, "folder" | "family" | "renderer" | "kwargs">,
  messages: readonly ChatMessage[],
  tools: unknown[] | undefined,
  ids: readonly number[],
): Mismatch[] {
  const options = { addGenerationPrompt: false, kwargs: ctx.kwargs, tools };
  const text = renderOrThrow(ctx.renderer, messages, options);
  const locate = messageLocator(ctx.renderer, messages, options, text);
  return compareTrajectories(ctx.folder, ctx.family, ctx.folder.encode(text), ids, locate);
}
