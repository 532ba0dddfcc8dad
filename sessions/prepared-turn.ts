// A chat turn as the session core prepared it under the session lock (session-core.ts,
// step 1): what the engine is asked and what the commit checks. A type of its own module, so
// the modules around the core can take it without importing the core.
import type { ChatMessage } from "./chat-template.ts";
import type { TreePlacement } from "./tree/tree-turn.ts";

export interface PreparedTurn {
  promptIds: ArrayLike<number>;
  /** promptIds as decimal text, in bytes (idsBytes). */
  promptBytes: Buffer;
  messages: ChatMessage[];
  tools?: unknown[];
  body: Record<string, unknown>;
  /** The bytes of `body` (the client's, unless a budget capped max_tokens). */
  clientBytes: Buffer;
  /** The turn's effective template kwargs (server, pinned, request). */
  kwargs: Readonly<Record<string, unknown>>;
  version: number;
  /** How many leading promptIds were copied from the session's latest checkpoint at `version` (Trajectory's copiedFrom). */
  copied: number;
  /** Whether `messages` took stored copies over the client's (then the journal keeps them). */
  adopted: boolean;
  /** In tree mode: where the turn attaches (sessions/tree/tree-turn.ts). */
  place?: TreePlacement;
}
