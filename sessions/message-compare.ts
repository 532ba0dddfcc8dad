// Message comparison for rollback detection and the append-only check (docs/architecture.md,
// "The token algorithm"). Two messages match when role, content, reasoning_content and
// tool_calls are deeply equal, with object key order ignored, tool-call `arguments`
// compared after parsing a JSON string, a list of text parts compared as the text it
// renders as, and null / "" / [] / absent all the same value.
// Other keys are ignored: clients add provider-specific fields. Never mutates its inputs.
import { contentText, normalizeArguments, type ChatMessage } from "./chat-template.ts";

const COMPARED_KEYS = ["role", "content", "reasoning_content", "tool_calls"] as const;

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

/** A comparison-ready view of a tool call: arguments parsed when they are a JSON string. */
function comparableToolCall(call: unknown): unknown {
  if (!call || typeof call !== "object") return call;
  const c = call as Record<string, unknown>;
  const fn = c.function;
  if (fn && typeof fn === "object" && "arguments" in (fn as object)) {
    const f = fn as Record<string, unknown>;
    return { ...c, function: { ...f, arguments: normalizeArguments(f.arguments) } };
  }
  if ("arguments" in c) return { ...c, arguments: normalizeArguments(c.arguments) };
  return c;
}

export function messagesMatch(a: ChatMessage, b: ChatMessage): boolean {
  for (const key of COMPARED_KEYS) {
    let va = a[key];
    let vb = b[key];
    if (key === "tool_calls") {
      va = Array.isArray(va) ? va.map(comparableToolCall) : va;
      vb = Array.isArray(vb) ? vb.map(comparableToolCall) : vb;
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
export function matchingPrefixLength(stored: readonly ChatMessage[], request: readonly ChatMessage[]): number {
  const n = Math.min(stored.length, request.length);
  let i = 0;
  while (i < n && messagesMatch(stored[i]!, request[i]!)) i++;
  return i;
}
