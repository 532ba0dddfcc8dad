// Everything a channel writes goes through here. Single-frame messages are written at
// once; streaming bodies are cut into chunks and written round-robin, one chunk per
// stream per turn, only while the stream has window credit from its receiver and the
// socket is not backed up (then we wait for 'drain'). So a small message waits behind
// at most one chunk, a slow consumer stalls only its own stream, and memory held here
// stays near one chunk per stream. A streamed Buffer may carry a release function under
// WRITTEN (buffers/release.ts, which producers import too): it is called once the socket
// has taken every byte of that buffer (or the stream was dropped), so a producer can
// reuse the memory for its next chunk instead of allocating a fresh one.
// Knows frames, not requests or errors.

import type { Socket } from "node:net";
import { encodeHead, Flag, Kind } from "./frame-codec.ts";
import { callRelease, WRITTEN, type Releasable } from "../buffers/release.ts";

/** A stream may send one chunk before the receiver's first grant (saves a round trip). */
const INITIAL_CREDIT = 1;

type Piece = Buffer;
type Release = (() => void) | undefined;

function releaseAll(releases: readonly Release[]): void {
  for (const r of releases) callRelease(r);
}

interface OutStream {
  id: number;
  iter: AsyncIterator<unknown> | Iterator<unknown>;
  credit: number; // bytes; a chunk may be sent while credit > 0
  pieces: Piece[]; // prefetched, not yet sent
  releases: Release[]; // pieces[i]'s producer release, called when its last byte is written
  bytes: number;
  pulling: boolean;
  sourceDone: boolean;
  failure: unknown;
  onDone(err?: unknown): void;
}

export type StreamSource = AsyncIterable<unknown> | Iterable<unknown>;

export class OutboundScheduler {
  readonly #socket: Socket;
  readonly #chunkBytes: number;
  readonly #maxFrameBytes: number;
  readonly #streams = new Map<number, OutStream>();
  #ring: OutStream[] = [];
  #rr = 0;
  #blocked = false; // socket.write returned false; waiting for 'drain'
  #corked = false;
  #pumping = false;
  #pumpScheduled: NodeJS.Immediate | undefined;
  #prefetched = 0;
  #closed = false;

  constructor(socket: Socket, chunkBytes: number, maxFrameBytes: number) {
    this.#socket = socket;
    this.#chunkBytes = chunkBytes;
    this.#maxFrameBytes = maxFrameBytes;
    socket.on("drain", () => {
      this.#blocked = false;
      this.#pump();
    });
  }

  /** Bytes written but not yet taken by the kernel, plus stream bytes prefetched here. */
  get bufferedBytes(): number {
    return this.#socket.writableLength + this.#prefetched;
  }

  /** socket.write returned false and 'drain' has not come yet: no chunk is written. */
  get socketBlocked(): boolean {
    return this.#blocked;
  }

  get streamCount(): number {
    return this.#streams.size;
  }

  /** Streams that have data ready but no window credit left. */
  get creditBlocked(): number {
    let n = 0;
    for (const s of this.#streams.values()) if (s.credit <= 0 && s.pieces.length > 0) n++;
    return n;
  }

  /** Writes one frame now. Throws FrameTooLargeError (nothing written) above the limit. */
  send(
    kind: number,
    flags: number,
    id: number,
    meta: unknown,
    body?: readonly Buffer[],
    bodyBytes = 0,
    releases?: Release[],
  ): void {
    const head = encodeHead(kind, flags, id, meta, bodyBytes, this.#maxFrameBytes);
    this.#write(head, body, releases);
  }

  /** Starts streaming `source` as CHUNK frames for `id`, then END; onDone(err) on failure or stop. */
  addStream(id: number, source: StreamSource, onDone: (err?: unknown) => void): void {
    let iter: OutStream["iter"];
    try {
      iter =
        Symbol.asyncIterator in source
          ? (source as AsyncIterable<unknown>)[Symbol.asyncIterator]()
          : (source as Iterable<unknown>)[Symbol.iterator]();
    } catch (err) {
      queueMicrotask(() => onDone(err ?? new Error("body source failed"))); // same path as a failure midway
      return;
    }
    const s: OutStream = {
      id,
      iter,
      credit: INITIAL_CREDIT,
      pieces: [],
      releases: [],
      bytes: 0,
      pulling: false,
      sourceDone: false,
      failure: undefined,
      onDone,
    };
    this.#streams.set(id, s);
    this.#ring.push(s);
    this.#pull(s);
  }

  grant(id: number, bytes: number): void {
    const s = this.#streams.get(id);
    if (s === undefined) return;
    s.credit += bytes;
    this.#schedulePump();
  }

  /** Stops a stream without END (the receiver gave up or the request was cancelled). */
  stop(id: number): void {
    const s = this.#streams.get(id);
    if (s === undefined) return;
    this.#remove(s);
    try {
      const r = s.iter.return?.();
      if (r instanceof Promise) r.catch(() => {});
    } catch {
      // a source that fails while being stopped has nothing left to tell anyone
    }
    s.onDone();
  }

  close(): void {
    this.#closed = true;
    if (this.#pumpScheduled !== undefined) clearImmediate(this.#pumpScheduled);
    for (const id of [...this.#streams.keys()]) this.stop(id);
  }

  #write(head: Buffer, body?: readonly Buffer[], releases?: Release[]): void {
    const socket = this.#socket;
    if (this.#closed || socket.destroyed) {
      if (releases) releaseAll(releases);
      return;
    }
    // Cork until the event loop's check phase, so frames written in this turn of the loop
    // leave in one writev: replies finished by several engine responses that arrived
    // together, requests from several clients read together. The body buffers are handed
    // over as they are, never copied into the head.
    if (!this.#corked) {
      this.#corked = true;
      socket.cork();
      setImmediate(() => {
        this.#corked = false;
        socket.uncork();
      });
    }
    let ok = socket.write(head);
    if (body !== undefined) {
      const last = body.length - 1;
      // Writes complete in order: the last buffer's callback covers the whole frame.
      for (let i = 0; i < body.length; i++)
        ok =
          i === last && releases?.length ? socket.write(body[i]!, () => releaseAll(releases)) : socket.write(body[i]!);
    }
    if (!ok) this.#blocked = true;
  }

  // Prefetches up to one chunk. Sync sources are drained in a loop (no recursion, so
  // a source of many tiny pieces cannot overflow the stack); async ones one step at a time.
  #pull(s: OutStream): void {
    while (!s.pulling && !s.sourceDone && s.bytes < this.#chunkBytes && this.#streams.get(s.id) === s) {
      let r: IteratorResult<unknown> | Promise<IteratorResult<unknown>>;
      try {
        r = s.iter.next();
      } catch (err) {
        this.#accept(s, undefined, err ?? new Error("body source failed"));
        break;
      }
      if (r instanceof Promise) {
        s.pulling = true;
        r.then(
          (v) => {
            s.pulling = false;
            this.#accept(s, v, undefined);
            // Sent on the next pump, with whatever else comes this turn: a piece of a body that
            // trickles in (an event stream) must not wait for a chunk's worth, or for its end.
            this.#schedulePump();
            this.#pull(s);
          },
          (err) => {
            s.pulling = false;
            this.#accept(s, undefined, err ?? new Error("body source failed"));
            this.#schedulePump();
          },
        );
        return;
      }
      this.#accept(s, r, undefined);
    }
    this.#schedulePump();
  }

  #accept(s: OutStream, r: IteratorResult<unknown> | undefined, err: unknown): void {
    if (this.#streams.get(s.id) !== s) return; // stopped meanwhile
    if (err !== undefined) {
      s.failure = err;
      s.sourceDone = true;
      return;
    }
    if (r!.done) {
      s.sourceDone = true;
      return;
    }
    const v = r!.value;
    if (!(v instanceof Uint8Array)) {
      s.failure = new TypeError(`a body source yielded ${typeof v}, not a Buffer`);
      s.sourceDone = true;
    } else if (v.length > 0) {
      const b = Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
      s.pieces.push(b);
      s.releases.push((v as Releasable)[WRITTEN]);
      s.bytes += b.length;
      this.#prefetched += b.length;
    }
  }

  // Pumping once per turn of the event loop lets prefetched small pieces coalesce
  // into one chunk frame instead of one frame per piece.
  #schedulePump(): void {
    if (this.#pumpScheduled !== undefined || this.#closed) return;
    this.#pumpScheduled = setImmediate(() => {
      this.#pumpScheduled = undefined;
      this.#pump();
    });
  }

  #pump(): void {
    if (this.#pumping || this.#closed) return;
    this.#pumping = true;
    try {
      let idle = 0; // consecutive streams that could not send
      while (!this.#blocked && this.#ring.length > 0 && idle < this.#ring.length) {
        const s = this.#ring[this.#rr % this.#ring.length]!;
        this.#rr = (this.#rr + 1) % Math.max(1, this.#ring.length);
        if (s.failure !== undefined) {
          this.#remove(s);
          s.onDone(s.failure);
          idle = 0;
        } else if (s.pieces.length === 0 && s.sourceDone) {
          this.#remove(s);
          this.send(Kind.END, Flag.BODY_NONE, s.id, undefined);
          s.onDone();
          idle = 0;
        } else if (s.pieces.length > 0 && s.credit > 0) {
          this.#sendChunk(s);
          this.#pull(s);
          idle = 0;
        } else {
          idle++;
        }
      }
    } finally {
      this.#pumping = false;
    }
  }

  #sendChunk(s: OutStream): void {
    const out: Buffer[] = [];
    let size = 0;
    let used = 0; // whole pieces taken
    while (used < s.pieces.length && size < this.#chunkBytes) {
      const p = s.pieces[used]!;
      const room = this.#chunkBytes - size;
      if (p.length <= room) {
        out.push(p);
        size += p.length;
        used++;
      } else {
        // The rest stays queued, and so does its release: it fires with the last part.
        out.push(p.subarray(0, room));
        s.pieces[used] = p.subarray(room);
        size += room;
      }
    }
    s.pieces.splice(0, used);
    const releases = s.releases.splice(0, used).filter((r) => r !== undefined);
    s.bytes -= size;
    this.#prefetched -= size;
    s.credit -= size;
    this.send(Kind.CHUNK, Flag.BODY_NONE, s.id, undefined, out, size, releases);
  }

  #remove(s: OutStream): void {
    this.#streams.delete(s.id);
    const i = this.#ring.indexOf(s);
    if (i >= 0) this.#ring.splice(i, 1);
    this.#prefetched -= s.bytes;
    s.bytes = 0;
    s.pieces = [];
    releaseAll(s.releases.splice(0)); // never to be written
  }
}
