// Forks across a re-shard (journal-reshard.ts): a FORK entry (issue 43) names no bytes of
// its own, only its parent's first turns, so it can be copied as it is only into the new
// shard that gets its parent too. When the new worker count puts the fork elsewhere, the
// fork is written there whole instead: a CREATE entry, then each of the parent's turns it
// keeps as a TURN entry of its own id (the request and reply bytes copied, the metadata
// re-encoded with the new id). It is then a copy in that shard, as any session is, and keeps
// what the fork had from its parent on replay (session-replay.ts, Trajectory.forkAt): the
// CREATE carries its budget, its mode and its routing key (its root's id, from the FORK
// entry). To know a parent's turns and budget at the fork, this follows every session's live
// turns through the old shard's entries, in order, as replay does (by where they are, never
// their bytes).
import type { FileHandle } from "node:fs/promises";
import type { SessionBudget } from "../budget.ts";
import { createMeta, encodeEntry, EntryKind, type EntryMeta, type TurnMeta } from "./journal-format.ts";
import type { ScannedEntry } from "./journal-reader.ts";
import { pathNode } from "./records.ts";

type ForkMeta = Extract<EntryMeta, { kind: typeof EntryKind.FORK }>;

interface LiveTurn {
  meta: TurnMeta;
  fh: FileHandle;
  payloadOffset: number;
  end: number;
}

/** The live turns of one old shard's sessions, as its entries go by. */
export class ShardTurns {
  readonly #turns = new Map<string, LiveTurn[]>();
  /** Each live session's budget: its CREATE's, or a fork's parent's (Trajectory.forkAt). */
  readonly #budgets = new Map<string, SessionBudget | undefined>();

  /** Follows one entry of the old shard (read from `fh`, which must stay open until the shard is done). */
  seen(entry: ScannedEntry, fh: FileHandle): void {
    const meta = entry.meta;
    switch (meta.kind) {
      case EntryKind.CREATE:
        this.#turns.set(meta.id, []);
        this.#budgets.set(meta.id, meta.budget);
        return;
      case EntryKind.DELETE:
        this.#turns.delete(meta.id);
        this.#budgets.delete(meta.id);
        return;
      case EntryKind.TRUNCATE: {
        const turns = this.#turns.get(meta.id);
        if (turns && turns.length > meta.count) turns.length = meta.count;
        return;
      }
      case EntryKind.FORK:
        // Its parent's entries may be compacted away (both deleted since): then it holds none.
        this.#turns.set(meta.id, this.#turns.has(meta.parent) ? this.#forkTurns(meta) : []);
        this.#budgets.set(meta.id, this.#budgets.get(meta.parent));
        return;
      case EntryKind.TURN: {
        const { kind: _kind, ...turn } = meta;
        const turns = this.#turns.get(meta.id) ?? [];
        if (turns.length > meta.index) turns.length = meta.index;
        turns.push({ meta: turn, fh, payloadOffset: entry.payloadOffset, end: entry.end });
        this.#turns.set(meta.id, turns);
        return;
      }
    }
  }

  /**
   * The entries that make fork `meta` a session of its own: CREATE, then the parent's first
   * `count` turns under the fork's id. Call before seen() of the FORK entry.
   */
  async *copyOf(meta: ForkMeta): AsyncGenerator<Buffer[]> {
    // A fork at a tree-mode node is a tree-mode session.
    const trajectory = meta.path === undefined ? undefined : ("tree" as const);
    const budget = this.#budgets.get(meta.parent);
    yield encodeEntry(createMeta(meta.id, { budget, trajectory, routingKey: meta.root })).parts;
    const turns = this.#forkTurns(meta);
    for (const turn of turns) {
      const payload = Buffer.allocUnsafe(turn.end - turn.payloadOffset);
      for (let done = 0; done < payload.length;) {
        const { bytesRead } = await turn.fh.read(payload, done, payload.length - done, turn.payloadOffset + done);
        if (bytesRead === 0) throw new Error(`unexpected end of file inside a turn of ${meta.parent}`);
        done += bytesRead;
      }
      yield encodeEntry({ ...turn.meta, kind: EntryKind.TURN, id: meta.id }, [payload]).parts;
    }
  }

  /** The turns fork `meta` holds: its parent's first `count`, or its `path`'s renumbered as their nodes (records.ts pathNode). */
  #forkTurns(meta: ForkMeta): LiveTurn[] {
    const parent = this.#turns.get(meta.parent) ?? [];
    const path = meta.path;
    const turns = path
      ? path.map((index, i) => {
          const turn = parent[index];
          return turn && { ...turn, meta: { ...turn.meta, index: i, node: pathNode(turn.meta.node, i) } };
        })
      : parent.slice(0, meta.count);
    if (turns.length < meta.count || turns.some((t) => t === undefined))
      throw new Error(`fork ${meta.id} of a missing turn of ${meta.parent}`);
    return turns as LiveTurn[];
  }
}
