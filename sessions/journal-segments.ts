// The segment files of one shard's journal: which exist, which one takes appends, the
// append queue (one writer, entries never interleave), the fsync policy, rotation at a
// size, and removal of a segment the store no longer needs (its file is unlinked at once;
// its handle stays open while a records GET still reads from it). A failed write is cut
// back off the file, or its segment is abandoned for a fresh one, so a bad disk never
// leaves garbage between whole entries. Knows bytes and files, not sessions.
import assert from "node:assert";
import { writevSync } from "node:fs";
import { mkdir, open, readdir, unlink, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { JournalWriteError } from "./errors.ts";
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
  dir: string;
  fsync?: FsyncPolicy;
  fsyncIntervalMs?: number;
  /** Rotate when an append would take the active segment past this. Default 256 MiB. */
  segmentBytes?: number;
  logger?: Logger;
  /** Called when a segment stops taking appends (compaction may now remove it). */
  onSealed?: (segment: Segment) => void;
}

const NAME = /^(\d{8})\.tj$/;
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
  #active: Segment | undefined;
  #nextSeq = 1;
  #queue: Promise<unknown> = Promise.resolve();
  #dirty = false;
  #syncing: Promise<void> | undefined;
  #closed = false;

  private constructor(options: SegmentLogOptions) {
    this.dir = options.dir;
    this.#fsync = options.fsync ?? "interval";
    this.#segmentBytes = options.segmentBytes ?? 256 * 1024 * 1024;
    this.#log = options.logger;
    this.#onSealed = options.onSealed;
    if (this.#fsync === "interval") {
      this.#timer = setInterval(() => this.#flush(), options.fsyncIntervalMs ?? 100);
      this.#timer.unref();
    }
  }

  /** Opens the directory (creating it) and every segment already in it, oldest first. */
  static async open(options: SegmentLogOptions): Promise<SegmentLog> {
    const log = new SegmentLog(options);
    await mkdir(options.dir, { recursive: true });
    const seqs = (await readdir(options.dir)).flatMap((name) => (NAME.test(name) ? [Number(NAME.exec(name)![1])] : [])).sort((a, b) => a - b);
    for (const seq of seqs) {
      const path = log.#path(seq);
      log.#segments.set(seq, new Segment(seq, path, await open(path, "r+")));
      log.#nextSeq = seq + 1;
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

  /** Removes a sealed segment: unlinked now, closed when no reader holds it any more. */
  async remove(segment: Segment): Promise<void> {
    assert.ok(segment !== this.#active && !segment.removed, `segment ${segment.path} cannot be removed`);
    segment.removed = true;
    this.#segments.delete(segment.seq);
    await unlink(segment.path).catch((err) => this.#log?.error({ err, path: segment.path }, "journal segment could not be removed"));
    if (segment.refs === 0) await this.#closeHandle(segment);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#timer);
    await this.#queue;
    await this.#syncing;
    if (this.#active && this.#fsync !== "never") await this.#active.fh.datasync().catch(() => {});
    for (const segment of this.#segments.values()) await this.#closeHandle(segment);
  }

  async #write(entry: EncodedEntry): Promise<{ segment: Segment; offset: number }> {
    if (this.#closed) throw new JournalWriteError(this.dir, { cause: new Error("the journal is closed") });
    let segment = this.#active;
    if (!segment || segment.broken || (segment.size > 0 && segment.size + entry.bytes > this.#segmentBytes)) segment = await this.#rotate();
    const offset = segment.size;
    try {
      await writeAll(segment.fh, entry.parts, offset, entry.bytes);
      if (this.#fsync === "every") await segment.fh.datasync();
    } catch (err) {
      await segment.fh.truncate(offset).catch((cutErr) => {
        segment.broken = true;
        this.#log?.error({ err: cutErr, path: segment.path }, "journal segment could not be cut back after a failed write; abandoning it");
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
      // The directory is ours and seq is past every file in it: nothing is overwritten.
      fh = await open(path, "w+");
    } catch (err) {
      throw new JournalWriteError(path, { cause: err });
    }
    const sealed = this.#active;
    const segment = new Segment(seq, path, fh);
    this.#segments.set(seq, segment);
    this.#active = segment;
    if (sealed) {
      if (this.#fsync !== "never") await sealed.fh.datasync().catch((err) => this.#log?.error({ err, path: sealed.path }, "journal fsync failed"));
      this.#onSealed?.(sealed);
    }
    return segment;
  }

  #flush(): void {
    const active = this.#active;
    if (!this.#dirty || this.#syncing || !active) return;
    this.#dirty = false;
    this.#syncing = active.fh
      .datasync()
      .catch((err) => this.#log?.error({ err, path: active.path }, "journal fsync failed: entries since the last fsync may not survive a power loss"))
      .finally(() => (this.#syncing = undefined));
  }

  async #closeHandle(segment: Segment): Promise<void> {
    await segment.fh.close().catch(() => {});
  }

  #path(seq: number): string {
    return join(this.dir, `${String(seq).padStart(8, "0")}.tj`);
  }
}
