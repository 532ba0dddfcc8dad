// Rebuilds a shard's sessions from its journal's history (records.ts ReplayVisitor): each
// committed turn's trajectory comes back from the request that was sent upstream (its
// prompt ids: `input_ids`, or vLLM's `prompt`; and, from a chat API, its messages and
// tools), the conversation the entry kept when the request does not carry it, and the
// completion ids and assistant message the entry kept, so no reply is parsed and nothing is
// re-tokenized. Runs before the worker is ready.
import assert from "node:assert";
import type { ChatMessage } from "../chat-template.ts";
import { parseJsonLossless } from "../lossless-json.ts";
import type { ReplayedTurn, ReplayVisitor } from "./records.ts";
import type { SessionRegistry } from "../registry.ts";
import { replayNode } from "../tree/tree-turn.ts";
import { replayForkAtNode } from "../tree/tree-fork.ts";
import { TrajectoryTree } from "../tree/tree.ts";

export interface ReplayCounts {
  sessions: number;
  turns: number;
}

interface SentRequest {
  messages?: ChatMessage[];
  tools?: unknown;
  input_ids?: number[];
  prompt?: unknown;
}

export function sessionRebuilder(registry: SessionRegistry): ReplayVisitor & { counts(): ReplayCounts } {
  return {
    created(sessionId, meta) {
      const t = registry.create(sessionId);
      t.budget = meta?.budget ?? {};
      if (meta?.trajectory === "tree") t.tree = new TrajectoryTree();
      if (meta?.routingKey !== undefined) t.routingKey = meta.routingKey;
    },
    finished(sessionId) {
      registry.get(sessionId).finished = true;
    },
    committed(sessionId, turn: ReplayedTurn) {
      const t = registry.get(sessionId);
      if (!t.tree) t.rollbackTo(turn.index);
      assert.equal(
        t.tree ? t.tree.size : t.assistantCount,
        turn.index,
        `journal: turn ${turn.index} of ${sessionId} follows only ${t.assistantCount} turns`,
      );
      // Read as the request was (lossless-json.ts): a drift report re-renders these messages.
      const sent = parseJsonLossless(turn.request.toString("utf8")) as SentRequest;
      // A resumed turn's request is its last one: the prompt, then the ids of the aborted parts.
      const resumedIds = turn.resumed?.parts.reduce((n, p) => n + p.completionIds.length, 0) ?? 0;
      const sentIds = sent.input_ids ?? sent.prompt;
      const promptIds = Array.isArray(sentIds) ? sentIds.slice(0, sentIds.length - resumedIds) : sentIds;
      const messages = turn.conversation?.messages ?? sent.messages;
      const tools = turn.conversation === undefined ? sent.tools : turn.conversation.tools;
      assert.ok(
        Array.isArray(messages) && Array.isArray(promptIds),
        `journal: turn ${turn.index} of ${sessionId} has no messages or prompt ids`,
      );
      const input = {
        promptIds: promptIds as number[],
        completionIds: turn.completionIds,
        messages: [...messages, turn.assistant],
        tools: Array.isArray(tools) ? [...tools] : undefined,
        weightVersion: turn.weightVersion ?? null,
        timestamp: turn.timestamp,
      };
      assert.ok(!t.tree === !turn.node, `journal: turn ${turn.index} of ${sessionId} and its session's mode disagree`);
      if (t.tree) replayNode(t, t.tree, input, turn.node!);
      else t.restore(input);
      t.clientApi = turn.clientApi ?? "chat";
    },
    forked(sessionId, parentId, count, path) {
      const parent = registry.get(parentId);
      registry.adopt(path ? replayForkAtNode(parent, path, sessionId) : parent.forkAt(count - 1, sessionId));
    },
    truncated(sessionId, count) {
      registry.get(sessionId).rollbackTo(count);
    },
    deleted(sessionId, reason) {
      registry.forget(sessionId, reason);
    },
    counts: () => ({
      sessions: registry.size,
      turns: [...registry.ids()].reduce(
        (n, id) => n + (registry.get(id).tree?.size ?? registry.get(id).assistantCount),
        0,
      ),
    }),
  };
}
