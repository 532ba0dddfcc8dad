// The segment files of one shard's journal: which exist, which one takes appends, the
// append queue (one writer, entries never interleave), the fsync policy, rotation at a
// size, and removal of a segment the store no longer needs (its file is unlinked at once;
// its handle stays open while a records GET still reads from it). A failed write is cut
// back off the file, or its segment is abandoned for a fresh one, so a bad disk never
// leaves garbage between whole entries. A removed segment may be kept as a spare file
// (renamed out of the journal's names, so replay never sees it) and reused by a later
// rotation, emptied first: its page-cache pages are then freed just before new ones are
// needed, and come back warm, instead of sitting free until the next rotation (fresh
// pages are the costliest part of a large append; see docs/operations.md). Knows bytes
// and files, not sessions.
import assert from "node:assert";
import { writevSync } from "node:fs";
import { mkdir, open, readdir, rename, unlink, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { JournalWriteError } from "../errors.ts";
import type { EncodedEntry } from "./journal-format.ts";

export type FsyncPolicy = "every" | "interval" | "never";

/** What the store hangs on a segment to decide when it may go (journal-store.ts). */
export interface SegmentUser {
  dead: boolean;
  segments: Set<Segment>;
}

export class Segment {
  /** Bytes of whole entries; the next append goes here. */
  size = 0;
  /** Open record streams reading this file. */
  refs = 0;
  removed = false;
  /** A write failed and could not be cut back: no more appends here. */
  broken = false;
  /** Sessions with create/turn/truncate entries here, and sessions whose delete is here. */
  readonly data = new Set<SegmentUser>();
  readonly tombstones = new Set<SegmentUser>();
  constructor(
    readonly seq: number,
    readonly path: string,
    readonly fh: FileHandle,
  ) {}
}

export interface SegmentLogOptions {
  /** This shard's journal directory (created if missing). */
  dir: string;
  fsync?: FsyncPolicy;
  fsyncIntervalMs?: number;
  /** Rotate when an append would take the active segment past this. Default 64 MiB. */
  segmentBytes?: number;
  /** Removed segments kept as spare files for later rotations to reuse. Default 8. */
  spareSegments?: number;
  logger?: Logger;
  /** Called when a segment stops taking appends (compaction may now remove it). */
  onSealed?: (segment: Segment) => void;
}

const NAME = /^(\d{8})\.tj$/;
const SPARE_NAME = /^spare-(\d+)\.tjs$/;

/** The sequence numbers of the segment files among a directory's `names`, oldest first (spares are not segments). */
export function segmentSeqs(names: readonly string[]): number[] {
  return names.flatMap((name) => (NAME.test(name) ? [Number(NAME.exec(name)![1])] : [])).sort((a, b) => a - b);
}

/** A segment's file name: its sequence number, 8 digits, `.tj`. */
export const segmentName = (seq: number): string => `${String(seq).padStart(8, "0")}.tj`;

export const DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024;
export const DEFAULT_SPARE_SEGMENTS = 8;

/** A removed segment's file, emptied only when a rotation takes it. */
interface Spare {
  path: string;
  fh: FileHandle;
}
// writev takes at most IOV_MAX (1024 on Linux) buffers at once.
const WRITEV_BATCH = 512;

// Entries up to this size are written with a synchronous writev on the event loop: a
// page-cache write of a few KiB costs less than the thread-pool round trip (two thread
// wake-ups) an async write takes. Larger entries (routing-replay replies) stay async.
const SYNC_WRITE_MAX_BYTES = 256 * 1024;

async function writeAll(fh: FileHandle, parts: readonly Buffer[], position: number, bytes: number): Promise<void> {
  const queue = parts.filter((p) => p.length > 0);
  const sync = bytes <= SYNC_WRITE_MAX_BYTES;
  let i = 0;
  while (i < queue.length) {
    const batch = queue.slice(i, i + WRITEV_BATCH);
    let bytesWritten = sync ? writevSync(fh.fd, batch, position) : (await fh.writev(batch, position)).bytesWritten;
    position += bytesWritten;
    // A short write: skip what went out and go on from the middle of a buffer.
    while (bytesWritten > 0 && i < queue.length) {
      const b = queue[i]!;
      if (bytesWritten >= b.length) {
        bytesWritten -= b.length;
        i++;
      } else {
        queue[i] = b.subarray(bytesWritten);
        bytesWritten = 0;
      }
    }
  }
}

export class SegmentLog {
  readonly dir: string;
  readonly #segments = new Map<number, Segment>();
  readonly #fsync: FsyncPolicy;
  readonly #segmentBytes: number;
  readonly #log?: Logger;
  readonly #onSealed?: (segment: Segment) => void;
  readonly #timer: NodeJS.Timeout | undefined;
  readonly #spares: Spare[] = [];
  readonly #spareLimit: number;
  #nextSpare = 1;
  #active: Segment | undefined;
  #nextSeq = 1;
  #queue: Promise<unknown> = Promise.resolve();
  #dirty = false;
  #syncing: Promise<void> | undefined;
  #closed = false;

  private constructor(options: SegmentLogOptions) {
    this.dir = options.dir;
    this.#fsync = options.fsync ?? "interval";
    this.#segmentBytes = options.segmentBytes ?? DEFAULT_SEGMENT_BYTES;
    this.#spareLimit = options.spareSegments ?? DEFAULT_SPARE_SEGMENTS;
    this.#log = options.logger;
    this.#onSealed = options.onSealed;
    if (this.#fsync === "interval") {
      this.#timer = setInterval(() => this.#flush(), options.fsyncIntervalMs ?? 100);
      this.#timer.unref();
    }
  }

  /** Opens the directory (creating it), every segment already in it, oldest first, and its spares. */
  static async open(options: SegmentLogOptions): Promise<SegmentLog> {
    const log = new SegmentLog(options);
    await mkdir(options.dir, { recursive: true });
    const names = await readdir(options.dir);
    for (const seq of segmentSeqs(names)) {
      const path = log.#path(seq);
      log.#segments.set(seq, new Segment(seq, path, await open(path, "r+")));
      log.#nextSeq = seq + 1;
    }
    for (const name of names) {
      const match = SPARE_NAME.exec(name);
      if (!match) continue;
      const path = join(options.dir, name);
      log.#nextSpare = Math.max(log.#nextSpare, Number(match[1]) + 1);
      if (log.#spares.length < log.#spareLimit) log.#spares.push({ path, fh: await open(path, "r+") });
      else await unlink(path);
    }
    return log;
  }

  /** Every segment still kept, oldest first. */
  segments(): Segment[] {
    return [...this.#segments.values()];
  }

  get active(): Segment | undefined {
    return this.#active;
  }

  /** Appends one entry after every earlier one; resolves once written (and fsynced under "every"). */
  append(entry: EncodedEntry): Promise<{ segment: Segment; offset: number }> {
    const result = this.#queue.then(() => this.#write(entry));
    this.#queue = result.catch(() => {});
    return result;
  }

  /** Cuts a recovered segment's torn tail off, so only whole entries stay on disk. */
  async cut(segment: Segment, end: number): Promise<void> {
    await segment.fh.truncate(end);
    segment.size = end;
  }

  pin(segment: Segment): void {
    segment.refs++;
  }

  unpin(segment: Segment): void {
    assert.ok(segment.refs > 0, `segment ${segment.path} unpinned more than pinned`);
    if (--segment.refs === 0 && segment.removed) void this.#closeHandle(segment);
  }

  /**
   * Removes a sealed segment from the journal: kept as a spare when there is room and no
   * reader holds it, otherwise unlinked now and closed when no reader holds it any more.
   */
  async remove(segment: Segment): Promise<void> {
    assert.ok(segment !== this.#active && !segment.removed, `segment ${segment.path} cannot be removed`);
    segment.removed = true;
    this.#segments.delete(segment.seq);
    if (segment.refs === 0 && !segment.broken && this.#spares.length < this.#spareLimit && !this.#closed) {
      const path = join(this.dir, `spare-${this.#nextSpare++}.tjs`);
      try {
        // Out of the journal's names at once: replay never reads a spare.
        await rename(segment.path, path);
        this.#spares.push({ path, fh: segment.fh });
        return;
      } catch (err) {
        this.#log?.warn({ err, path: segment.path }, "journal segment could not be kept as a spare; removing it");
      }
    }
    await unlink(segment.path).catch((err) =>
      this.#log?.error({ err, path: segment.path }, "journal segment could not be removed"),
    );
    if (segment.refs === 0) await this.#closeHandle(segment);
  }

  /** Spare files kept for reuse (tests and operators). */
  sparePaths(): string[] {
    return this.#spares.map((s) => s.path);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#timer);
    await this.#queue;
    await this.#syncing;
    if (this.#active && this.#fsync !== "never") await this.#active.fh.datasync().catch(() => {});
    for (const segment of this.#segments.values()) await this.#closeHandle(segment);
    for (const spare of this.#spares.splice(0)) await spare.fh.close().catch(() => {});
  }

  async #write(entry: EncodedEntry): Promise<{ segment: Segment; offset: number }> {
    if (this.#closed) throw new JournalWriteError(this.dir, { cause: new Error("the journal is closed") });
    let segment = this.#active;
    if (!segment || segment.broken || (segment.size > 0 && segment.size + entry.bytes > this.#segmentBytes))
      segment = await this.#rotate();
    const offset = segment.size;
    try {
      await writeAll(segment.fh, entry.parts, offset, entry.bytes);
      if (this.#fsync === "every") await segment.fh.datasync();
    } catch (err) {
      await segment.fh.truncate(offset).catch((cutErr) => {
        segment.broken = true;
        this.#log?.error(
          { err: cutErr, path: segment.path },
          "journal segment could not be cut back after a failed write; abandoning it",
        );
      });
      throw new JournalWriteError(segment.path, { cause: err });
    }
    segment.size = offset + entry.bytes;
    this.#dirty = true;
    return { segment, offset };
  }

  async #rotate(): Promise<Segment> {
    const seq = this.#nextSeq++;
    const path = this.#path(seq);
    let fh: FileHandle;
    try {
      fh = (await this.#reuseSpare(path)) ?? (await open(path, "w+"));
    } catch (err) {
      throw new JournalWriteError(path, { cause: err });
    }
    const sealed = this.#active;
    const segment = new Segment(seq, path, fh);
    this.#segments.set(seq, segment);
    this.#active = segment;
    if (sealed) {
      if (this.#fsync !== "never")
        await sealed.fh.datasync().catch((err) => this.#log?.error({ err, path: sealed.path }, "journal fsync failed"));
      this.#onSealed?.(sealed);
    }
    return segment;
  }

  /**
   * A spare file as the new segment at `path`, or undefined when none is left. Emptied
   * before it takes the journal's name, so a crash in between leaves an empty spare or an
   * empty segment, never old entries under a new name. A spare that fails is dropped.
   */
  async #reuseSpare(path: string): Promise<FileHandle | undefined> {
    for (let spare = this.#spares.pop(); spare; spare = this.#spares.pop()) {
      try {
        await spare.fh.truncate(0);
        // The directory is ours and seq is past every file in it: nothing is overwritten.
        await rename(spare.path, path);
        return spare.fh;
      } catch (err) {
        this.#log?.warn({ err, path: spare.path }, "journal spare could not be reused; removing it");
        await spare.fh.close().catch(() => {});
        await unlink(spare.path).catch(() => {});
      }
    }
    return undefined;
  }

  #flush(): void {
    const active = this.#active;
    if (!this.#dirty || this.#syncing || !active) return;
    this.#dirty = false;
    this.#syncing = active.fh
      .datasync()
      .catch((err) =>
        this.#log?.error(
          { err, path: active.path },
          "journal fsync failed: entries since the last fsync may not survive a power loss",
        ),
      )
      .finally(() => (this.#syncing = undefined));
  }

  async #closeHandle(segment: Segment): Promise<void> {
    await segment.fh.close().catch(() => {});
  }

  #path(seq: number): string {
    return join(this.dir, segmentName(seq));
  }
}
