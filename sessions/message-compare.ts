// Message comparison for rollback detection and the append-only check (docs/architecture.md,
// "The token algorithm"; docs/agents.md, "Choosing a matcher"). Two messages match when the
// fields the session's matcher compares are deeply equal, with object key order ignored,
// tool-call `arguments` compared after parsing a JSON string, a list of text parts compared
// as the text it renders as, and null / "" / [] / absent all the same value. Other keys are
// ignored: clients add provider-specific fields, and a tool call's `index` (what streaming
// clients keep) or any key besides its id, type, name and arguments is never compared, in
// any mode. The matchers:
// - strict: role, content, reasoning_content and tool calls (id, type, name, arguments);
// - loose: as strict, but a tool call's id is ignored and its arguments compare as JSON values;
// - role-content: role, content and the tool calls' names and arguments only.
// Inside the matched prefix the stored messages win (adoptStored). Never mutates its inputs.
import { contentText, normalizeArguments, type ChatMessage } from "./chat-template.ts";

export const MESSAGE_MATCHERS = ["strict", "loose", "role-content"] as const;
export type MessageMatcher = (typeof MESSAGE_MATCHERS)[number];

const COMPARED_KEYS: Readonly<Record<MessageMatcher, readonly string[]>> = {
  strict: ["role", "content", "reasoning_content", "tool_calls"],
  loose: ["role", "content", "reasoning_content", "tool_calls"],
  "role-content": ["role", "content", "tool_calls"],
};

/** null, undefined, "" and [] are interchangeable across client libraries. */
function isEmptyish(v: unknown): boolean {
  return v === null || v === undefined || v === "" || (Array.isArray(v) && v.length === 0);
}

/** Deep equality with key order ignored and the empty-ish values identified. */
export function deepEqualLoose(a: unknown, b: unknown): boolean {
  if (isEmptyish(a) || isEmptyish(b)) return isEmptyish(a) && isEmptyish(b);
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    if (a.length !== bb.length) return false;
    for (let i = 0; i < a.length; i++) if (!deepEqualLoose(a[i], bb[i])) return false;
    return true;
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  // Keys whose value is empty-ish count as absent, so {x: null} matches {}.
  const keys = new Set([...Object.keys(ao), ...Object.keys(bo)]);
  for (const key of keys) if (!deepEqualLoose(ao[key], bo[key])) return false;
  return true;
}

/** Any JSON text parsed into its value (a number, a string, a list too); anything else as it is. */
function jsonValue(args: unknown): unknown {
  if (typeof args !== "string") return args;
  try {
    return JSON.parse(args) as unknown;
  } catch {
    return args;
  }
}

/** The parts of a tool call a matcher compares (OpenAI's nested `function`, or a flat call). */
function comparableToolCall(call: unknown, matcher: MessageMatcher): unknown {
  if (!call || typeof call !== "object") return call;
  const c = call as Record<string, unknown>;
  const fn = c.function && typeof c.function === "object" ? (c.function as Record<string, unknown>) : c;
  const name = fn.name;
  if (matcher === "strict") return { id: c.id, type: c.type, name, arguments: normalizeArguments(fn.arguments) };
  const args = jsonValue(fn.arguments);
  return matcher === "loose" ? { type: c.type, name, arguments: args } : { name, arguments: args };
}

export function messagesMatch(a: ChatMessage, b: ChatMessage, matcher: MessageMatcher = "strict"): boolean {
  for (const key of COMPARED_KEYS[matcher]) {
    let va = a[key];
    let vb = b[key];
    if (key === "tool_calls") {
      va = Array.isArray(va) ? va.map((c) => comparableToolCall(c, matcher)) : va;
      vb = Array.isArray(vb) ? vb.map((c) => comparableToolCall(c, matcher)) : vb;
    } else if (key === "content") {
      // A client may send a turn as a string once and as text parts the next time.
      va = contentText(va);
      vb = contentText(vb);
    }
    if (!deepEqualLoose(va, vb)) return false;
  }
  return true;
}

/** Length of the longest common prefix of two message lists under `messagesMatch`. */
export function matchingPrefixLength(
  stored: readonly ChatMessage[],
  request: readonly ChatMessage[],
  matcher: MessageMatcher = "strict",
): number {
  const n = Math.min(stored.length, request.length);
  let i = 0;
  while (i < n && messagesMatch(stored[i]!, request[i]!, matcher)) i++;
  return i;
}

const callId = (call: unknown): unknown =>
  call && typeof call === "object" ? (call as { id?: unknown }).id : undefined;

/**
 * The request with its first `matched` messages replaced by the stored ones: what the model
 * saw wins over the client's copy (re-serialized, re-id'd, stripped of reasoning). A tool
 * result after the prefix that answers a call by the client's new id is pointed at the
 * stored call's id, so templates that look calls up by id still find it. `adopted` says
 * whether anything differs from the request (then the request alone no longer tells the turn).
 */
export function adoptStored(
  stored: readonly ChatMessage[],
  request: readonly ChatMessage[],
  matched: number,
): { messages: ChatMessage[]; adopted: boolean } {
  const messages = request.slice();
  let adopted = false;
  const ids = new Map<string, unknown>();
  for (let i = 0; i < matched; i++) {
    const mine = stored[i]!;
    const theirs = request[i]!;
    messages[i] = mine;
    if (!adopted && !sameJson(mine, theirs)) adopted = true;
    const calls = Array.isArray(theirs.tool_calls) ? theirs.tool_calls : [];
    const kept = Array.isArray(mine.tool_calls) ? mine.tool_calls : [];
    calls.forEach((call, k) => {
      const from = callId(call);
      const to = callId(kept[k]);
      if (typeof from === "string" && to !== undefined && from !== to) ids.set(from, to);
    });
  }
  if (ids.size > 0)
    for (let i = matched; i < messages.length; i++) {
      const m = messages[i]!;
      const to = typeof m.tool_call_id === "string" ? ids.get(m.tool_call_id) : undefined;
      if (to !== undefined) {
        messages[i] = { ...m, tool_call_id: to };
        adopted = true;
      }
    }
  return { messages, adopted };
}

/** Exact JSON equality, key order ignored (no empty-ish identification). */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const keys = Object.keys(ao).filter((k) => ao[k] !== undefined);
  if (keys.length !== Object.keys(bo).filter((k) => bo[k] !== undefined).length) return false;
  return keys.every((k) => sameJson(ao[k], bo[k]));
}
