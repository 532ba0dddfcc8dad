// The token ids of one session's committed turns, stored once (issue 25): one growing
// Int32Array holds the ids of the latest checkpoint, and every earlier checkpoint is an
// offset into it, not a copy. A checkpoint is usually a prefix of the next one; a family
// whose next prompt replaces a checkpoint's last ids (GLM: its stop id; maxTrimTokens)
// overwrites them in the store, so each checkpoint keeps the few ids it lost that way (its
// `tail`). A rollback truncates the store back to a checkpoint and writes its tail back.
// It checks nothing (trajectory.ts verifies a turn before it is pushed) and knows no messages.
import assert from "node:assert";

/** What readers of the checkpoints (prompt building, samples) see: ids by turn, never the store. */
export interface CheckpointView {
  /** Committed turns, each with one checkpoint (its prompt ids + completion ids). */
  readonly count: number;
  /** Ids in checkpoint k. */
  lengthOf(k: number): number;
  /** Where checkpoint k's completion starts. */
  promptLengthOf(k: number): number;
  /** Id i of checkpoint k (0 <= i < lengthOf(k)). */
  idAt(k: number, i: number): number;
  /** Checkpoint k's first `end` ids (all of them by default) as a new array. */
  ids(k: number, end?: number): number[];
}

interface Mark {
  /** The checkpoint's length. */
  end: number;
  promptLength: number;
  /** Its first `shared` ids are the store's; the rest are `tail`. */
  shared: number;
  tail?: Int32Array;
}

/** Capacity grows to this factor of what is needed (amortized O(1) appends, at most 25% unused). */
const GROWTH = 1.25;
const MIN_CAPACITY = 256;
const EMPTY = new Int32Array(0);

export class Checkpoints implements CheckpointView {
  #store: Int32Array = EMPTY;
  /** Ids in the store: the latest checkpoint's length (0 before the first turn). */
  #length = 0;
  #marks: Mark[] = [];

  get count(): number {
    return this.#marks.length;
  }
  /** Ids of the latest checkpoint. */
  get length(): number {
    return this.#length;
  }
  /** Int32 slots allocated (for tests and sizing; at most 1.25 x length after growth). */
  get capacity(): number {
    return this.#store.length;
  }
  /** The latest checkpoint's ids, a view of the store (valid until the next push or truncate). */
  current(): Int32Array {
    return this.#store.subarray(0, this.#length);
  }

  lengthOf(k: number): number {
    return this.#mark(k).end;
  }
  promptLengthOf(k: number): number {
    return this.#mark(k).promptLength;
  }
  idAt(k: number, i: number): number {
    const mark = this.#mark(k);
    return i < mark.shared ? this.#store[i]! : mark.tail![i - mark.shared]!;
  }
  ids(k: number, end?: number): number[] {
    const mark = this.#mark(k);
    const stop = Math.min(end ?? mark.end, mark.end);
    const out: number[] = [];
    const shared = Math.min(stop, mark.shared);
    for (let i = 0; i < shared; i++) out.push(this.#store[i]!);
    for (let i = shared; i < stop; i++) out.push(mark.tail![i - mark.shared]!);
    return out;
  }

  /** Commits checkpoint `count` = prompt + completion; the store then holds it. */
  push(prompt: readonly number[], completion: readonly number[]): void {
    const end = prompt.length + completion.length;
    const at = (i: number) => (i < prompt.length ? prompt[i]! : completion[i - prompt.length]!);
    // Where the new checkpoint leaves the store's ids: usually at its end (an append).
    const common = Math.min(this.#length, end);
    let from = 0;
    while (from < common && this.#store[from] === at(from)) from++;
    this.#keepTails(from);
    this.#reserve(end);
    for (let i = from; i < end; i++) this.#store[i] = at(i);
    this.#length = end;
    this.#marks.push({ end, promptLength: prompt.length, shared: end });
  }

  /** Keeps the first `count` checkpoints; the store holds the last of them again. */
  truncate(count: number): void {
    if (count >= this.#marks.length) return;
    this.#marks.length = count;
    if (count === 0) {
      this.#store = EMPTY; // a retried first turn: nothing of the session's ids is left
      this.#length = 0;
      return;
    }
    const last = this.#marks[count - 1]!;
    this.#keepTails(last.shared);
    if (last.tail) {
      this.#reserve(last.end);
      this.#store.set(last.tail, last.shared);
      last.tail = undefined;
    }
    last.shared = last.end;
    this.#length = last.end;
  }

  /** Before the store's ids from `from` on change: each checkpoint that reads them keeps its own copy. */
  #keepTails(from: number): void {
    if (from >= this.#length) return;
    for (const mark of this.#marks) {
      if (mark.shared <= from) continue;
      const own = this.#store.slice(from, mark.shared);
      mark.tail = mark.tail ? concat(own, mark.tail) : own;
      mark.shared = from;
    }
  }

  #reserve(size: number): void {
    if (size <= this.#store.length) return;
    const grown = new Int32Array(Math.max(MIN_CAPACITY, Math.ceil(size * GROWTH)));
    grown.set(this.#store.subarray(0, this.#length));
    this.#store = grown;
  }

  #mark(k: number): Mark {
    const mark = this.#marks[k];
    assert.ok(mark, `checkpoint ${k} of ${this.#marks.length}`);
    return mark;
  }
}

function concat(a: Int32Array, b: Int32Array): Int32Array {
  const out = new Int32Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
