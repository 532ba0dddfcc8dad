// The token ids of one session's committed turns, stored once (issue 25): one growing
// store holds the ids of the latest checkpoint, and every earlier checkpoint is
// an offset into it, not a copy. The store is chunked: a first chunk that doubles up to
// CHUNK ids, then fixed chunks of CHUNK ids (id-chunk.ts: 2 bytes per id below 65536, 3
// below 2^24, issue 47), so a growing session never frees and
// reallocates its ids (freed stores of ever larger sizes fragmented the workers' malloc
// heap: docs/benchmark.md, "Memory per token held"), and it leaves at most one partly
// used chunk. A checkpoint is usually a prefix of the next one; a family
// whose next prompt replaces a checkpoint's last ids (GLM: its stop id; maxTrimTokens)
// overwrites them in the store, so each checkpoint keeps the few ids it lost that way (its
// `tail`). A rollback truncates the store back to a checkpoint and writes its tail back.
// A fork (issue 43) is a new Checkpoints holding the first checkpoints of this one: it shares
// their chunks copy-on-write, so a fork costs its marks, not its ids. The shared chunks are
// frozen: a write into one (a later turn, a rollback's tail), on either side, goes into a
// new chunk that reads the ids before the write through the frozen one (IdChunk.over), so
// writes on one side never reach the other and neither copies what they share.
// It checks nothing (trajectory.ts verifies a turn before it is pushed) and knows no messages.
import assert from "node:assert";
import { IdChunk } from "./id-chunk.ts";

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
  /** Writes checkpoint k's ids into `out` from its start, when the view can copy them faster than `ids`. */
  copyInto?(k: number, out: Int32Array): void;
}

interface Mark {
  /** The checkpoint's length. */
  end: number;
  promptLength: number;
  /** Its first `shared` ids are the store's; the rest are `tail`. */
  shared: number;
  tail?: Int32Array;
}

/** Ids per chunk: 8-12 KiB. */
const CHUNK_BITS = 12;
const CHUNK = 1 << CHUNK_BITS;
const CHUNK_MASK = CHUNK - 1;
const FIRST_CHUNK = 256;
/** The slots a store writes into a shared chunk own (#own) are a multiple of this many ids. */
const COPY_STEP = 64;

export class Checkpoints implements CheckpointView {
  /** A frozen chunk is shared with a fork: neither side writes it, each writes a new chunk over it (#own). */
  #chunks: IdChunk[] = [];
  /** Ids in the store: the latest checkpoint's length (0 before the first turn). */
  #length = 0;
  #marks: Mark[] = [];
  /** Whether the mark objects are shared with a fork (each side copies them before it changes one). */
  #marksShared = false;

  get count(): number {
    return this.#marks.length;
  }
  /** Ids of the latest checkpoint. */
  get length(): number {
    return this.#length;
  }
  /** Id slots allocated (for tests and sizing). */
  get capacity(): number {
    return this.#chunks.reduce((n, chunk) => n + chunk.capacity, 0);
  }
  /** Bytes the allocated slots take (for tests and sizing). */
  get bytes(): number {
    return this.#chunks.reduce((n, chunk) => n + chunk.bytes, 0);
  }
  /** Id slots this store alone holds (a fork's shared chunks, and ids read through them, are not counted). */
  get ownedCapacity(): number {
    return this.#chunks.reduce((n, chunk) => n + (chunk.frozen ? 0 : chunk.ownCapacity), 0);
  }
  /** Id i of the latest checkpoint (i < length). */
  at(i: number): number {
    return this.#chunks[i >>> CHUNK_BITS]!.get(i & CHUNK_MASK);
  }

  lengthOf(k: number): number {
    return this.#mark(k).end;
  }
  promptLengthOf(k: number): number {
    return this.#mark(k).promptLength;
  }
  idAt(k: number, i: number): number {
    const mark = this.#mark(k);
    return i < mark.shared ? this.at(i) : mark.tail![i - mark.shared]!;
  }
  ids(k: number, end?: number): number[] {
    const mark = this.#mark(k);
    const stop = Math.min(end ?? mark.end, mark.end);
    // Allocated whole: an array grown by push() re-copied itself ~20 times on the way to 80k
    // ids (3x the CPU of this fill). A turn's prompt is not built from here any more but in
    // an Int32Array (copyInto, id-builder.ts; docs/benchmark.md, "Long sessions").
    const out: number[] = new Array<number>(stop);
    const shared = Math.min(stop, mark.shared);
    let p = 0;
    for (let c = 0; c * CHUNK < shared; c++) {
      const n = Math.min(CHUNK, shared - c * CHUNK);
      this.#chunks[c]!.readInto(out, p, n);
      p += n;
    }
    for (let i = shared; i < stop; i++) out[p++] = mark.tail![i - mark.shared]!;
    return out;
  }

  /** Writes checkpoint k's ids into `out` from its start (chunk by chunk, IdChunk.readInto). */
  copyInto(k: number, out: Int32Array): void {
    const mark = this.#mark(k);
    let p = 0;
    for (let c = 0; c * CHUNK < mark.shared; c++) {
      const n = Math.min(CHUNK, mark.shared - c * CHUNK);
      this.#chunks[c]!.readInto(out, p, n);
      p += n;
    }
    if (mark.tail) out.set(mark.tail.subarray(0, mark.end - mark.shared), p);
  }

  /**
   * Commits checkpoint `count` = prompt + completion; the store then holds it. The first
   * `same` prompt ids are known to be the latest checkpoint's (copied from it: the turn's
   * prompt was built on it), so only the rest is compared.
   */
  push(prompt: ArrayLike<number>, completion: readonly number[], same = 0): void {
    const end = prompt.length + completion.length;
    // Where the new checkpoint leaves the store's ids: usually at its end (an append).
    const common = Math.min(this.#length, end);
    const from = this.#firstDifference(prompt, completion, common, Math.min(same, common, prompt.length));
    this.#keepTails(from);
    this.#reserve(end);
    this.#own(from, end);
    for (let i = from; i < end; i++)
      this.#chunks[i >>> CHUNK_BITS]!.set(
        i & CHUNK_MASK,
        i < prompt.length ? prompt[i]! : completion[i - prompt.length]!,
      );
    this.#length = end;
    // concat, not push: exactly its marks, no spare slots (trajectory.ts restore says why).
    this.#marks = this.#marks.concat([{ end, promptLength: prompt.length, shared: end }]);
  }

  /**
   * The first i < n where the latest checkpoint's ids and `ids` differ, else n (n <= length,
   * n <= ids.length): a turn's check of its prompt against the history (verify), in
   * IdChunk's tight loops rather than through at() id by id. Ids below `from` are known
   * equal (copied from this store: Trajectory.verify) and not compared.
   */
  mismatch(ids: ArrayLike<number>, n: number, from = 0): number {
    from = Math.min(from, n);
    for (let c = from >>> CHUNK_BITS; c * CHUNK < n; c++) {
      const base = c * CHUNK;
      const m = Math.min(CHUNK, n - base);
      const end = this.#chunks[c]!.mismatch(ids, base, Math.max(0, from - base), m);
      if (end < m) return base + end;
    }
    return n;
  }

  /** The first i in [from, `common`) where the store and prompt + completion differ, else `common`. */
  #firstDifference(prompt: ArrayLike<number>, completion: readonly number[], common: number, from: number): number {
    for (let c = from >>> CHUNK_BITS; c * CHUNK < common; c++) {
      const chunk = this.#chunks[c]!;
      const base = c * CHUNK;
      const n = Math.min(CHUNK, common - base);
      const inPrompt = Math.max(0, Math.min(n, prompt.length - base));
      const inPromptEnd = chunk.mismatch(prompt, base, Math.min(inPrompt, Math.max(0, from - base)), inPrompt);
      if (inPromptEnd < inPrompt) return base + inPromptEnd;
      const end = chunk.mismatch(completion, base - prompt.length, inPrompt, n);
      if (end < n) return base + end;
    }
    return common;
  }

  /** Keeps the first `count` checkpoints; the store holds the last of them again. */
  truncate(count: number): void {
    if (count >= this.#marks.length) return;
    this.#marks.length = count;
    this.#ownMarks();
    if (count === 0) {
      this.#chunks = []; // a retried first turn: nothing of the session's ids is left
      this.#length = 0;
      return;
    }
    const last = this.#marks[count - 1]!;
    this.#keepTails(last.shared);
    if (last.tail) {
      this.#reserve(last.end);
      this.#own(last.shared, last.end);
      for (let i = last.shared; i < last.end; i++)
        this.#chunks[i >>> CHUNK_BITS]!.set(i & CHUNK_MASK, last.tail[i - last.shared]!);
      last.tail = undefined;
    }
    last.shared = last.end;
    this.#length = last.end;
  }

  /**
   * A new store holding this one's first `count` checkpoints (1 <= count <= this.count),
   * sharing their chunks: neither side's later writes (turns, rollbacks) reach the other.
   * Costs an array of the marks and at most one chunk (the fork's store ends where checkpoint
   * `count - 1` ends, so a tail of its overwritten by a later turn here is written back).
   */
  fork(count: number): Checkpoints {
    assert.ok(
      Number.isInteger(count) && count >= 1 && count <= this.#marks.length,
      `fork of ${count} checkpoints of ${this.#marks.length}`,
    );
    // The chunks checkpoint `count - 1` reads; those past it stay this store's alone.
    const used = Math.ceil(this.#marks[count - 1]!.end / CHUNK);
    const copy = new Checkpoints();
    // The marks' objects too: a fork at the last turn (group sampling's) never changes them.
    copy.#marks = this.#marks.slice();
    copy.#marksShared = this.#marksShared = true;
    copy.#length = this.#length;
    copy.#chunks = this.#chunks.slice(0, Math.max(used, 1));
    // From now on neither side writes into a shared chunk.
    for (const chunk of copy.#chunks) chunk.freeze();
    copy.truncate(count);
    return copy;
  }

  /**
   * Before ids from `from` to `end` are written: each chunk they touch is this store's own.
   * A shared chunk is not copied: the new one reads the ids before `from` through it
   * (IdChunk.over) and holds only the slots written from there, rounded up to COPY_STEP
   * ids: a branch that adds a few ids after a fork owns about what it wrote, not a copy of
   * the shared chunk's ids (bench/fork-heap.ts); a later turn grows it by doubling (#reserve).
   */
  #own(from: number, end: number): void {
    if (from >= end) return;
    for (let c = from >>> CHUNK_BITS; c <= (end - 1) >>> CHUNK_BITS; c++) {
      const chunk = this.#chunks[c]!;
      if (!chunk.frozen) continue;
      const start = c * CHUNK;
      // The chunk's ids that stay as they are: those before `from` the store still holds.
      const keep = Math.max(0, Math.min(from, this.#length) - start);
      const written = Math.min(CHUNK, end - start) - keep;
      const size = Math.min(CHUNK, keep + Math.max(Math.ceil(written / COPY_STEP) * COPY_STEP, COPY_STEP));
      this.#chunks[c] = IdChunk.over(chunk, keep, size);
    }
  }

  /** Before the store's ids from `from` on change: each checkpoint that reads them keeps its own copy. */
  #keepTails(from: number): void {
    if (from >= this.#length) return;
    this.#ownMarks();
    for (const mark of this.#marks) {
      if (mark.shared <= from) continue;
      const own = Int32Array.from({ length: mark.shared - from }, (_, i) => this.at(from + i));
      mark.tail = mark.tail ? concat(own, mark.tail) : own;
      mark.shared = from;
    }
  }

  /** Before a mark changes: this store's own copies of marks a fork shares. */
  #ownMarks(): void {
    if (!this.#marksShared) return;
    this.#marks = this.#marks.map((m) => ({ ...m }));
    this.#marksShared = false;
  }

  #reserve(size: number): void {
    const chunks = this.#chunks;
    // A chunk's first ids double up to CHUNK (a short session, or a fork's copy of a shared
    // chunk, holds little); chunks past the last one are CHUNK from the start.
    for (let c = 0; c * CHUNK < size; c++) {
      const need = Math.min(CHUNK, size - c * CHUNK);
      const chunk = chunks[c];
      if (chunk === undefined) {
        chunks[c] = new IdChunk(c === 0 ? Math.max(sizeFor(need), FIRST_CHUNK) : CHUNK);
      } else if (chunk.capacity < need) {
        let length = Math.max(chunk.capacity, FIRST_CHUNK);
        while (length < need) length *= 2;
        chunks[c] = chunk.copy(
          Math.min(length, CHUNK),
          Math.min(chunk.capacity, Math.max(0, this.#length - c * CHUNK)),
        );
      }
    }
  }

  #mark(k: number): Mark {
    const mark = this.#marks[k];
    assert.ok(mark, `checkpoint ${k} of ${this.#marks.length}`);
    return mark;
  }
}

/** The power of two at least `n`, at most CHUNK. */
function sizeFor(n: number): number {
  let length = 1;
  while (length < n) length *= 2;
  return Math.min(length, CHUNK);
}

function concat(a: Int32Array, b: Int32Array): Int32Array {
  const out = new Int32Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
