// Rebuilds a shard's sessions from its journal's history (records.ts ReplayVisitor): each
// committed turn's trajectory comes back from the request that was sent upstream (its
// messages, tools and input_ids) plus the completion ids and assistant message the entry
// kept, so no reply is parsed and nothing is re-tokenized. Runs before the worker is ready.
import assert from "node:assert";
import type { ChatMessage } from "../chat-template.ts";
import type { ReplayedTurn, ReplayVisitor } from "./records.ts";
import type { SessionRegistry } from "../registry.ts";

export interface ReplayCounts {
  sessions: number;
  turns: number;
}

interface SentRequest {
  messages?: ChatMessage[];
  tools?: unknown;
  input_ids?: number[];
}

export function sessionRebuilder(registry: SessionRegistry): ReplayVisitor & { counts(): ReplayCounts } {
  return {
    created(sessionId) {
      registry.create(sessionId);
    },
    committed(sessionId, turn: ReplayedTurn) {
      const t = registry.get(sessionId);
      t.rollbackTo(turn.index);
      assert.equal(
        t.assistantCount,
        turn.index,
        `journal: turn ${turn.index} of ${sessionId} follows only ${t.assistantCount} turns`,
      );
      const sent = JSON.parse(turn.request.toString("utf8")) as SentRequest;
      assert.ok(
        Array.isArray(sent.messages) && Array.isArray(sent.input_ids),
        `journal: turn ${turn.index} of ${sessionId} has no messages or input_ids`,
      );
      t.restore({
        promptIds: sent.input_ids,
        completionIds: turn.completionIds,
        messages: [...sent.messages, turn.assistant],
        tools: Array.isArray(sent.tools) ? sent.tools : undefined,
      });
    },
    truncated(sessionId, count) {
      registry.get(sessionId).rollbackTo(count);
    },
    deleted(sessionId) {
      registry.forget(sessionId);
    },
    counts: () => ({
      sessions: registry.size,
      turns: [...registry.ids()].reduce((n, id) => n + registry.get(id).assistantCount, 0),
    }),
  };
}
