// A response body made of small in-memory pieces and byte ranges of journal segments,
// yielded in order as Buffers of at most 1 MiB read with FileHandle.read: a records GET
// of many GiB never sits in memory, and stored bytes are spliced in unparsed. It holds
// its segments pinned (so compaction cannot close them) until it ends, fails, or its
// consumer stops early (return()). It never writes and never parses.
//
// Read buffers come from a small pool and go back to it when the consumer says it is done
// with them: each yielded chunk carries a release (buffers/release.ts), which the
// transport calls once the chunk's bytes are on the socket. A records GET of many MiB
// then reuses a few buffers instead of allocating one per MiB (why that matters:
// buffers/buffer-pool.ts). A consumer that never releases only costs allocations.
//
// A stream can also move to another process before it is read (the worker's records
// streamer, docs/architecture.md): portableParts() names its file ranges by path and by
// the descriptor this process holds, and openRecordStream() there reads the same bytes
// from files it opens itself.
import { existsSync } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { BufferPool } from "../../buffers/buffer-pool.ts";
import { releasable } from "../../buffers/release.ts";

export const READ_CHUNK_BYTES = 1024 * 1024;

// Eight concurrent GETs each keep up to a transport window (8 MiB) of chunks unsent.
const readBuffers = new BufferPool(READ_CHUNK_BYTES, { keepBytes: 64 * 2 ** 20, idleBytes: 4 * 2 ** 20 });

/** Read buffers waiting in the pool (tests watch reuse with it). */
export function pooledReadBuffers(): number {
  return readBuffers.pooled;
}

/** `buffer`'s first `length` bytes as a chunk whose release (once) returns the buffer to the pool. */
function readChunk(buffer: Buffer, length: number): Buffer {
  // A fresh view per chunk: the pooled buffer itself is never handed out, so each chunk has its own release.
  return releasable(buffer.subarray(0, length), () => readBuffers.give(buffer));
}

/** An open file ranges are read from: a journal segment, or a file openRecordStream opened. */
export interface RangeFile {
  readonly path: string;
  readonly fh: FileHandle;
}
export interface FileRange {
  segment: RangeFile;
  position: number;
  length: number;
}
export type BodyPart = Buffer | FileRange;
/** A file range named for a process that opens the file itself: by path, and by the descriptor its owner holds. */
export interface PathRange {
  path: string;
  /** The descriptor of the file in the process that made the range (its /proc/<pid>/fd/<fd>). */
  fd: number;
  position: number;
  length: number;
}
export type PortablePart = Buffer | PathRange;

export class RecordStream implements AsyncIterableIterator<Buffer> {
  /**
   * The body's whole length, known before a byte is read: what a writer promises its
   * client, and holds itself to (a stream stopped early yields fewer bytes, and a
   * response cut short must never look complete: docs/http.md).
   */
  readonly byteLength: number;
  readonly #parts: BodyPart[];
  #index = 0;
  #offset = 0; // within the current file range
  #release: (() => void) | undefined;

  /** `release` runs exactly once, when the stream ends, fails or is stopped. */
  constructor(parts: BodyPart[], release: () => void) {
    this.#parts = parts;
    this.#release = release;
    this.byteLength = parts.reduce((n, part) => n + part.length, 0);
  }

  /**
   * The body's parts with file ranges named by path, for another process to read with
   * openRecordStream(); undefined once reading has begun. The files stay pinned until this
   * stream is stopped (return()), which its owner does once the other process is done.
   */
  portableParts(): PortablePart[] | undefined {
    if (this.#release === undefined || this.#index !== 0 || this.#offset !== 0) return undefined;
    return this.#parts.map((part) =>
      Buffer.isBuffer(part)
        ? part
        : { path: part.segment.path, fd: part.segment.fh.fd, position: part.position, length: part.length },
    );
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<Buffer>> {
    try {
      for (;;) {
        const part = this.#parts[this.#index];
        if (part === undefined) {
          this.#finish();
          return { done: true, value: undefined };
        }
        if (Buffer.isBuffer(part)) {
          this.#index++;
          if (part.length > 0) return { done: false, value: part };
          continue;
        }
        if (this.#offset >= part.length) {
          this.#index++;
          this.#offset = 0;
          continue;
        }
        // A buffer no consumer holds any more: the transport keeps a yielded chunk until it is sent.
        const length = Math.min(READ_CHUNK_BYTES, part.length - this.#offset);
        const buffer = readBuffers.take();
        let filled = 0;
        try {
          while (filled < length) {
            const { bytesRead } = await part.segment.fh.read(
              buffer,
              filled,
              length - filled,
              part.position + this.#offset + filled,
            );
            if (bytesRead === 0)
              throw new Error(
                `journal segment ${part.segment.path} ended at ${part.position + this.#offset + filled}, inside a record`,
              );
            filled += bytesRead;
          }
        } catch (err) {
          readBuffers.give(buffer);
          throw err;
        }
        this.#offset += length;
        return { done: false, value: readChunk(buffer, length) };
      }
    } catch (err) {
      this.#finish();
      throw err;
    }
  }

  async return(): Promise<IteratorResult<Buffer>> {
    this.#finish();
    return { done: true, value: undefined };
  }

  #finish(): void {
    const release = this.#release;
    this.#release = undefined;
    this.#index = this.#parts.length;
    release?.();
  }
}

/**
 * A RecordStream over parts another process named (portableParts()): each file is opened
 * read-only once, and closed when the stream ends, fails or is stopped. Rejects, with
 * nothing left open, when a file cannot be opened.
 *
 * With the pid of the process that made the parts, and where Linux's /proc is there, a file
 * is opened as /proc/<pid>/fd/<fd>: the very file that process holds open (pinned), even
 * if compaction has unlinked its path since. Elsewhere, by path.
 */
export async function openRecordStream(parts: readonly PortablePart[], owner?: number): Promise<RecordStream> {
  const byFd = owner !== undefined && existsSync(`/proc/${owner}/fd`);
  const files = new Map<string, RangeFile>();
  const closeAll = () => {
    for (const { fh } of files.values()) fh.close().catch(() => {});
  };
  try {
    for (const part of parts)
      if (!Buffer.isBuffer(part) && !files.has(part.path))
        files.set(part.path, {
          path: part.path,
          fh: await open(byFd ? `/proc/${owner}/fd/${part.fd}` : part.path, "r"),
        });
  } catch (err) {
    closeAll();
    throw err;
  }
  const ranges = parts.map((part) =>
    Buffer.isBuffer(part) ? part : { segment: files.get(part.path)!, position: part.position, length: part.length },
  );
  return new RecordStream(ranges, closeAll);
}
