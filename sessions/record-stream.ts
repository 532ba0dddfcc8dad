// A response body made of small in-memory pieces and byte ranges of journal segments,
// yielded in order as Buffers of at most 1 MiB read with FileHandle.read: a records GET
// of many GiB never sits in memory, and stored bytes are spliced in unparsed. It holds
// its segments pinned (so compaction cannot close them) until it ends, fails, or its
// consumer stops early (return()). It never writes and never parses.
import type { Segment } from "./journal-segments.ts";

export const READ_CHUNK_BYTES = 1024 * 1024;

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
        // A fresh buffer per chunk: the transport keeps a yielded chunk until it is sent.
        const length = Math.min(READ_CHUNK_BYTES, part.length - this.#offset);
        const chunk = Buffer.allocUnsafe(length);
        let filled = 0;
        while (filled < length) {
          const { bytesRead } = await part.segment.fh.read(chunk, filled, length - filled, part.position + this.#offset + filled);
          if (bytesRead === 0) throw new Error(`journal segment ${part.segment.path} ended at ${part.position + this.#offset + filled}, inside a record`);
          filled += bytesRead;
        }
        this.#offset += length;
        return { done: false, value: chunk };
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
