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
import { BufferPool } from "../../buffers/buffer-pool.ts";
import { releasable } from "../../buffers/release.ts";
import type { Segment } from "./journal-segments.ts";

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

export interface FileRange {
  segment: Segment;
  position: number;
  length: number;
}
export type BodyPart = Buffer | FileRange;

export class RecordStream implements AsyncIterableIterator<Buffer> {
  readonly #parts: BodyPart[];
  #index = 0;
  #offset = 0; // within the current file range
  #release: (() => void) | undefined;

  /** `release` runs exactly once, when the stream ends, fails or is stopped. */
  constructor(parts: BodyPart[], release: () => void) {
    this.#parts = parts;
    this.#release = release;
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
