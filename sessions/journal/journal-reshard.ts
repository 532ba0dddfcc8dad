// Re-sharding a journal for another worker count: every whole entry of the old shards'
// segments is copied, byte for byte, into the new shard that owns its session, in the
// order it was written (one session's entries all sit in one old shard, so their order
// holds). Entries are never decoded again or re-encoded: their checksums travel with them.
// The new shards are written into a fresh directory and made durable (every file and
// directory fsynced) before this returns; switching to them is the caller's business
// (server/host/journal-layout.ts), so a crash here leaves the old shards untouched. A torn
// last entry is left behind, as replay would drop it; corruption stops the re-shard. A fork
// whose parent goes to another new shard is written out whole there (reshard-forks.ts).
import { mkdir, open, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { fsyncDir, namesIn } from "../../buffers/fsync.ts";
import { scanSegment } from "./journal-reader.ts";
import { DEFAULT_SEGMENT_BYTES, segmentName, segmentSeqs } from "./journal-segments.ts";
import { EntryKind } from "./journal-format.ts";
import { ShardTurns } from "./reshard-forks.ts";

export interface ReshardOptions {
  /** The old shards' directories, in shard order. */
  sources: readonly string[];
  /** Where the new shards go (`shard-<j>/` each); created, must not hold segments yet. */
  target: string;
  /** The new worker count. */
  workers: number;
  /** The new shard of a session (the router's placement). */
  shardOf: (sessionId: string, workers: number) => number;
  /** Rotate a new shard's segment past this size. Default 64 MiB, as the journal's own. */
  segmentBytes?: number;
}

export interface ReshardResult {
  sessions: number;
  entries: number;
  bytes: number;
}

const COPY_CHUNK = 1024 * 1024;

/** One new shard's segments, written front to back. */
class ShardWriter {
  #fh: FileHandle | undefined;
  #size = 0;
  #seq = 0;
  constructor(
    readonly dir: string,
    readonly segmentBytes: number,
  ) {}

  /** The file to append `bytes` to, rotating when it would pass the segment size. */
  async fileFor(bytes: number): Promise<{ fh: FileHandle; at: number }> {
    if (!this.#fh || (this.#size > 0 && this.#size + bytes > this.segmentBytes)) {
      await this.#seal();
      this.#fh = await open(join(this.dir, segmentName(++this.#seq)), "wx");
      this.#size = 0;
    }
    const at = this.#size;
    this.#size += bytes;
    return { fh: this.#fh, at };
  }

  async close(): Promise<void> {
    await this.#seal();
    await fsyncDir(this.dir);
  }

  async #seal(): Promise<void> {
    if (!this.#fh) return;
    await this.#fh.sync();
    await this.#fh.close();
    this.#fh = undefined;
  }
}

async function copyRange(from: FileHandle, start: number, end: number, to: FileHandle, at: number, buf: Buffer) {
  for (let pos = start; pos < end;) {
    const { bytesRead } = await from.read(buf, 0, Math.min(buf.length, end - pos), pos);
    if (bytesRead === 0) throw new Error(`unexpected end of file at ${pos}`);
    let written = 0;
    while (written < bytesRead) {
      const { bytesWritten } = await to.write(buf, written, bytesRead - written, at + (pos - start) + written);
      written += bytesWritten;
    }
    pos += bytesRead;
  }
}

async function writeAll(to: FileHandle, parts: readonly Buffer[], at: number): Promise<void> {
  for (const part of parts) {
    for (let written = 0; written < part.length;) {
      const { bytesWritten } = await to.write(part, written, part.length - written, at + written);
      written += bytesWritten;
    }
    at += part.length;
  }
}

/** Copies every old shard's whole entries into `target/shard-<j>/`, durable when it resolves. */
export async function reshardJournal(options: ReshardOptions): Promise<ReshardResult> {
  const writers: ShardWriter[] = [];
  for (let j = 0; j < options.workers; j++) {
    const dir = join(options.target, `shard-${j}`);
    await mkdir(dir, { recursive: true });
    writers.push(new ShardWriter(dir, options.segmentBytes ?? DEFAULT_SEGMENT_BYTES));
  }
  const sessions = new Set<string>();
  let entries = 0;
  let bytes = 0;
  const buf = Buffer.allocUnsafe(COPY_CHUNK);
  const shardOf = (id: string) => options.shardOf(id, options.workers);
  for (const source of options.sources) {
    // A fork's parent's turns may sit in any earlier segment of its shard: all stay open until the shard is done.
    const handles: FileHandle[] = [];
    const turns = new ShardTurns();
    try {
      for (const seq of segmentSeqs(await namesIn(source))) {
        const path = join(source, segmentName(seq));
        const fh = await open(path, "r");
        handles.push(fh);
        await scanSegment(path, fh, async (entry) => {
          const { meta } = entry;
          const writer = writers[shardOf(meta.id)]!;
          sessions.add(meta.id);
          if (meta.kind === EntryKind.FORK && shardOf(meta.parent) !== shardOf(meta.id)) {
            for await (const parts of turns.copyOf(meta)) {
              const size = parts.reduce((n, p) => n + p.length, 0);
              const { fh: out, at } = await writer.fileFor(size);
              await writeAll(out, parts, at);
              entries++;
              bytes += size;
            }
          } else {
            const size = entry.end - entry.offset;
            const { fh: out, at } = await writer.fileFor(size);
            await copyRange(fh, entry.offset, entry.end, out, at, buf);
            entries++;
            bytes += size;
          }
          turns.seen(entry, fh);
        });
      }
    } finally {
      for (const fh of handles) await fh.close();
    }
  }
  for (const writer of writers) await writer.close();
  await fsyncDir(options.target);
  return { sessions: sessions.size, entries, bytes };
}
