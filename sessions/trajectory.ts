// The token trajectory of one session (docs/architecture.md, "The token algorithm"): the messages
// as of the last committed turn (one array: a turn's message count says where it ends),
// one checkpoint per committed assistant turn (checkpoints.ts: the ids stored once), the
// lock and the closing flag. It applies rollbacks and commits turns after the prefix check.
// It holds no records (records.ts does) and never renders or tokenizes. forkAt() starts a
// new trajectory from one of its turns (POST /sessions/{id}/fork, issue 43): the ids are
// shared copy-on-write (checkpoints.ts), the messages and turns are the parent's objects.
import { AsyncLock } from "./async-lock.ts";
import type { ChatMessage } from "./chat-template.ts";
import { Checkpoints, type CheckpointView } from "./checkpoints.ts";
import { TokenizationError } from "./errors.ts";
import type { TrajectoryView } from "./prompt-builder.ts";
import type { SessionBudget } from "./budget.ts";
import type { TrajectoryTree } from "./tree/tree.ts";

interface CommittedTurn {
  /** Message count right after the turn (its assistant message is the last one). */
  readonly messageCount: number;
  /** The tools the turn was rendered with (the previous turn's object when equal); the drift report re-renders with the last turn's. */
  readonly tools?: unknown[];
  /** The record's weight version and commit time (Unix seconds), for the listing (session-summary.ts). */
  readonly weightVersion: string | null;
  readonly timestamp: number | null;
}

export class Trajectory implements TrajectoryView {
  readonly id: string;
  readonly lock = new AsyncLock();
  /** Set by DELETE: the session is gone for every later request, and in-flight chats skip their update. */
  closing = false;
  /** The client API its turns came through, from the first commit on (chat-request.ts). */
  clientApi?: "chat" | "messages";
  /** Its token and turn budget (budget.ts), set at creation. */
  budget: SessionBudget = {};
  /** Set by an abort (POST /sessions/{id}/abort): later turns are refused, records stay. */
  finished = false;
  /**
   * The key its engine requests carry in the --engine-session-headers (upstream-keys.ts): its
   * id, unless it was set to another session's (a fork takes its root's, so a shared prefix
   * stays on one engine replica).
   */
  routingKey: string;
  /** Set in tree mode (sessions/tree/): every turn is a node, and this linear view holds one node's path. */
  tree?: TrajectoryTree;
  #messages: ChatMessage[] = [];
  #turns: CommittedTurn[] = [];
  #checkpoints = new Checkpoints();
  #version = 0;

  constructor(id: string) {
    this.id = id;
    this.routingKey = id;
  }

  /**
   * A new trajectory `id` whose history is this one's up to and including turn `turn`
   * (0-based, < assistantCount): the same messages, turns and ids, the ids' chunks shared
   * copy-on-write, so it costs O(turns), not O(tokens). Later turns or rollbacks on either
   * side never affect the other. It keeps the client API, the budget and the routing key (its root's); it is
   * not finished (a fork of an aborted session is a new attempt).
   */
  forkAt(turn: number, id: string): Trajectory {
    if (!Number.isInteger(turn) || turn < 0 || turn >= this.#turns.length)
      throw new RangeError(`turn ${turn} of ${this.#turns.length}`);
    const fork = new Trajectory(id);
    fork.routingKey = this.routingKey;
    fork.clientApi = this.clientApi;
    fork.budget = this.budget;
    fork.#turns = this.#turns.slice(0, turn + 1);
    fork.#messages = this.#messages.slice(0, fork.#turns[turn]!.messageCount);
    fork.#checkpoints = this.#checkpoints.fork(turn + 1);
    return fork;
  }

  get messages(): readonly ChatMessage[] {
    return this.#messages;
  }
  /** Bumped by every rollback and commit: a chat whose snapshot is stale skips its update. */
  get version(): number {
    return this.#version;
  }
  get assistantCount(): number {
    return this.#turns.length;
  }
  get checkpoints(): CheckpointView {
    return this.#checkpoints;
  }
  /**
   * The ids of its committed turns as they are now, in a store of their own that shares
   * this one's chunks copy-on-write (checkpoints.ts fork): a tree-mode node keeps its
   * checkpoint this way (sessions/tree/tree.ts), at most one chunk copied, not its tokens.
   */
  idsSnapshot(): CheckpointView {
    return this.#checkpoints.fork(this.#checkpoints.count);
  }
  get turnMessageCounts(): readonly number[] {
    return this.#turns.map((t) => t.messageCount);
  }
  /** The current token ids (the last checkpoint, empty before the first turn), as a new array. */
  get currentIds(): number[] {
    const c = this.#checkpoints;
    return c.count === 0 ? [] : c.ids(c.count - 1);
  }
  /** The distinct weight versions of the committed turns, in turn order (null: sent before any was set). */
  get weightVersions(): (string | null)[] {
    return [...new Set(this.#turns.map((t) => t.weightVersion))];
  }
  /** The first weight version its committed turns were sent under (null: none yet): the `session` cache salt. */
  get firstWeightVersion(): string | null {
    for (const turn of this.#turns) if (turn.weightVersion !== null) return turn.weightVersion;
    return null;
  }
  /** The last committed turn's commit time (Unix seconds), null without turns. */
  get lastCommitAt(): number | null {
    return this.#turns.at(-1)?.timestamp ?? null;
  }
  get lastTools(): unknown[] | undefined {
    return this.#turns.length === 0 ? undefined : this.#turns[this.#turns.length - 1]!.tools;
  }

  /** Keeps the first `turns` committed turns and their messages. */
  rollbackTo(turns: number): void {
    if (turns >= this.#turns.length) return;
    this.#version++;
    this.#turns.length = turns;
    this.#checkpoints.truncate(turns);
    this.#messages = this.#messages.slice(0, turns === 0 ? 0 : this.#turns[turns - 1]!.messageCount);
  }

  /**
   * Commits a turn: the previous checkpoint, minus its last `maxTrimTokens` ids, must be a
   * prefix of prompt + completion (nothing generated is ever re-tokenized), else 500.
   */
  commit(turn: TurnInput, maxTrimTokens: number): void {
    this.verify(turn, maxTrimTokens);
    this.restore(turn);
  }

  /** The check of commit() without the commit (a journal write goes between the two). */
  verify(turn: TurnInput, maxTrimTokens: number): void {
    const previous = this.#checkpoints;
    const prompt = turn.promptIds;
    const length = prompt.length + turn.completionIds.length;
    const at = (i: number) => (i < prompt.length ? prompt[i] : turn.completionIds[i - prompt.length]);
    const mustMatch = Math.max(0, previous.length - maxTrimTokens);
    if (length < mustMatch) {
      throw new TokenizationError(
        `the new trajectory (${length} tokens) is shorter than the previous checkpoint (${previous.length} tokens, ${maxTrimTokens} trimmable)`,
      );
    }
    // The prompt's part first, chunk by chunk (Checkpoints.mismatch), past the ids copied from the store.
    let i = previous.mismatch(prompt, Math.min(mustMatch, prompt.length), this.#copied(turn));
    for (; i < mustMatch; i++) {
      if (previous.at(i) !== at(i)) {
        throw new TokenizationError(
          `the previous checkpoint is not a prefix of the new trajectory: first difference at token ${i} (previous ${previous.at(i)}, new ${at(i)}) of ${previous.length}`,
        );
      }
    }
  }

  /**
   * How many leading prompt ids are the latest checkpoint's by construction: those the turn
   * says it copied from it, while the trajectory is still at the version it copied them at.
   */
  #copied(turn: TurnInput): number {
    const from = turn.copiedFrom;
    return from !== undefined && from.version === this.#version ? from.ids : 0;
  }

  /** Appends a turn unchecked: a verified one, or one replayed from the journal that verified it. */
  restore(turn: TurnInput): void {
    const last = this.#turns[this.#turns.length - 1];
    // Each request carries its own copy of the tools: a turn whose tools equal the last one's keeps only that one.
    const tools = last?.tools !== undefined && sameJson(last.tools, turn.tools) ? last.tools : turn.tools;
    this.#checkpoints.push(turn.promptIds, turn.completionIds, this.#copied(turn));
    this.#version++;
    // concat, not push: an array of exactly its turns (push leaves up to 16 spare slots in
    // a short one, 128 bytes a session: many forks of few turns each, bench/fork-heap.ts).
    this.#turns = this.#turns.concat([
      {
        messageCount: turn.messages.length,
        tools,
        weightVersion: turn.weightVersion ?? null,
        timestamp: turn.timestamp ?? null,
      },
    ]);
    this.#messages = shareKept(this.#messages, turn.messages);
  }
}

export interface TurnInput {
  promptIds: ArrayLike<number>;
  /**
   * The first `ids` prompt ids were copied from the latest checkpoint while the trajectory
   * was at `version` (prompt-builder.ts): then they are not compared with it again, which
   * on a long session was the whole history's ids twice a turn (verify, then restore).
   */
  copiedFrom?: { version: number; ids: number };
  completionIds: readonly number[];
  messages: ChatMessage[];
  tools?: unknown[];
  /** The weight version the turn was sent under (its record's). */
  weightVersion?: string | null;
  /** The turn's commit time, Unix seconds (its record's timestamp). */
  timestamp?: number;
}

function sameJson(a: unknown, b: unknown): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

/**
 * `next` (a turn's messages) with each message equal to the kept one at its place replaced by
 * the kept object. A live turn's messages already are the kept objects where they matched
 * (message-compare.ts adoptStored); a turn replayed from the journal (session-replay.ts,
 * sessions/tree/ replayNode) brings its whole history parsed anew, so without this a replayed
 * session held its history's text as parsed by its last turn, and each replayed fork and tree
 * node a copy of its own. Only messages whose fields are all strings, in the same order, are
 * shared: their equality is exact (no number lexemes or key orders that lossless-json.ts
 * keeps per object could differ).
 */
function shareKept(kept: readonly ChatMessage[], next: ChatMessage[]): ChatMessage[] {
  const n = Math.min(kept.length, next.length);
  for (let i = 0; i < n; i++) if (kept[i] !== next[i] && sameTextMessage(kept[i]!, next[i]!)) next[i] = kept[i]!;
  return next;
}

function sameTextMessage(a: ChatMessage, b: ChatMessage): boolean {
  const keys = Object.keys(a);
  const other = Object.keys(b);
  if (keys.length !== other.length) return false;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    if (key !== other[i] || typeof a[key] !== "string" || a[key] !== b[key]) return false;
  }
  return true;
}
