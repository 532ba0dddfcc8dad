// The default family: no model knowledge, so no boundary fix and no trim; a segment is
// assistant text when a role header starts it. It knows no stop-token text, reasoning or
// tool-call syntax, so a completion is all content, verbatim.
import type { TitoFamily } from "./family.ts";

export const defaultFamily: TitoFamily = {
  name: "default",
  maxTrimTokens: 0,
  trailingTokenIds: new Set(),
  boundaryIds: () => [],
  // Without model knowledge the best signal is a role header that starts the segment.
  isAssistantSegment: (prevSpecial, text) => prevSpecial !== undefined && /^\s*assistant\b/.test(text),
  parseCompletion: (text) => ({ content: text, malformedToolCalls: 0 }),
};
