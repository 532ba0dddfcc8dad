// A TITO turn loop without HTTP, for every family's tests (families.test.ts and the
// families' own files): the engine "writes" family.formatCompletion(turn) and stops with a
// given stop token; the client gets the parsed message back and sends it with its next
// request, as a real client does.
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import { compareTrajectories, type MismatchType } from "../../../sessions/drift.ts";
import type { AssistantTurn, TitoFamily } from "../../../sessions/families/index.ts";
import type { TurnRecord } from "../../../sessions/journal/records.ts";
import { planPrompt, renderOrThrow, type PromptContext } from "../../../sessions/prompt-builder.ts";
import { Trajectory } from "../../../sessions/trajectory.ts";

export function counter(prefix = "call_"): () => string {
  let n = 0;
  return () => `${prefix}${++n}`;
}

/** The assistant message a client gets for a completion text (and sends back next turn). */
export function messageOf(
  family: TitoFamily,
  text: string,
  tools: unknown[] | undefined,
  kwargs: Readonly<Record<string, unknown>>,
  newId: () => string,
): ChatMessage {
  const { malformedToolCalls, ...parsed } = family.parseCompletion(text, { tools, kwargs, newId });
  assert.is(malformedToolCalls, 0, `the completion parses: ${text}`);
  return { role: "assistant", ...parsed };
}

export interface Played {
  /** The assistant message the client got. */
  message: ChatMessage;
  promptIds: number[];
  completionIds: number[];
  record: TurnRecord;
}

/**
 * One turn: plans the prompt for `request`, checks it extends the previous checkpoint (all
 * of it, or all but `maxTrimTokens` ids), "generates" `turn` ending with `stop`, commits.
 */
export function playTurn(
  ctx: PromptContext,
  t: Trajectory,
  request: ChatMessage[],
  turn: AssistantTurn,
  stop: string,
  tools: unknown[] | undefined,
  newId: () => string,
): Played {
  const { folder, family } = ctx;
  const previous = [...t.currentIds];
  const plan = planPrompt(ctx, t, request, tools);
  assert.is(plan.rollbackToTurns, undefined);
  const must = Math.max(0, previous.length - family.maxTrimTokens);
  assert.equal(Array.from(plan.promptIds).slice(0, must), previous.slice(0, must), "the prompt extends the checkpoint");
  const text = family.formatCompletion(turn, ctx.kwargs);
  const completionIds = [...folder.encode(text), folder.tokenId(stop)!];
  const message = messageOf(family, folder.decode(completionIds), tools, ctx.kwargs, newId);
  t.commit({ promptIds: plan.promptIds, completionIds, messages: [...request, message], tools }, family.maxTrimTokens);
  return {
    message,
    promptIds: Array.from(plan.promptIds),
    completionIds,
    record: generateRecord(Array.from(plan.promptIds), completionIds),
  };
}

/** The drift classes between the trajectory and a canonical render of its messages. */
export function driftTypes(ctx: PromptContext, t: Trajectory): MismatchType[] {
  const text = renderOrThrow(ctx.renderer, t.messages, {
    addGenerationPrompt: false,
    kwargs: ctx.kwargs,
    tools: t.lastTools,
  });
  return compareTrajectories(ctx.folder, ctx.family, ctx.folder.encode(text), t.currentIds).map((m) => m.type);
}

/** A stored SGLang /generate record of a turn (logprob -1 per generated token). */
function generateRecord(promptIds: readonly number[], completionIds: readonly number[]): TurnRecord {
  const reply = JSON.stringify({
    text: "",
    meta_info: {
      finish_reason: { type: "stop" },
      output_token_logprobs: completionIds.map((id) => [-1, id, null]),
    },
  });
  return {
    timestamp: 0,
    method: "POST",
    path: "/generate",
    statusCode: 200,
    request: Buffer.from(JSON.stringify({ input_ids: promptIds })),
    response: [Buffer.from(reply)],
  };
}

/** One turn of a scripted loop: the messages the client appends, then what the model writes. */
export interface LoopRound {
  /** Appended after the last assistant message; a tool_call_id "$k" names that message's k-th call. */
  append?: ChatMessage[];
  turn: AssistantTurn;
  /** The stop token the model ends this turn with (default: the script's). */
  stop?: string;
}

export interface LoopScript {
  history: ChatMessage[];
  tools?: unknown[];
  stop: string;
  rounds: LoopRound[];
}

export interface PlayedLoop {
  t: Trajectory;
  turns: Played[];
  requests: ChatMessage[][];
}

/** Plays a script's rounds in one trajectory, each request being the last one, its reply and the round's appends. */
export function playLoop(
  ctx: PromptContext,
  name: string,
  script: LoopScript,
  afterTurn?: (rounds: number, t: Trajectory) => void,
): PlayedLoop {
  const t = new Trajectory(name);
  const newId = counter();
  const turns: Played[] = [];
  const requests: ChatMessage[][] = [];
  let request = script.history;
  for (const [k, round] of script.rounds.entries()) {
    if (k > 0) {
      const last = turns[k - 1]!.message;
      const ids = ((last.tool_calls ?? []) as Array<{ id: string }>).map((c) => c.id);
      const resolve = (m: ChatMessage): ChatMessage =>
        typeof m.tool_call_id === "string" && m.tool_call_id.startsWith("$")
          ? { ...m, tool_call_id: ids[Number(m.tool_call_id.slice(1))]! }
          : m;
      request = [...request, last, ...(round.append ?? []).map(resolve)];
    }
    requests.push(request);
    turns.push(playTurn(ctx, t, request, round.turn, round.stop ?? script.stop, script.tools, newId));
    afterTurn?.(k + 1, t);
  }
  return { t, turns, requests };
}
