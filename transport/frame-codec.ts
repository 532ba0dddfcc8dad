// The frame layout and an incremental decoder. A frame on the wire is
//   u32 LE  length of everything after this field
//   u8      kind            u8 flags
//   u48 LE  request id
//   u32 LE  header length   then that many bytes of msgpackr header (may be 0)
//   body    the remaining bytes, raw (never re-encoded)
// Only the small header goes through msgpackr; the body is written and read as is.
// The decoder hands body bytes on as slices of the socket's chunks (no copy, no
// Buffer.concat of bodies); only a fixed head or a header split across chunks is joined.
// Nothing but body slices outlives a push(): a head or header split across chunks is
// kept as a copy, and decoded headers copy their binary values, because the chunk may
// be a reused read slab (read-slabs.ts).

import { Packr } from "msgpackr";
import { FrameTooLargeError, ProtocolError } from "./errors.ts";

export const HEAD_BYTES = 16;
const LENGTH_COVERED = HEAD_BYTES - 4; // bytes of the fixed head counted by the length field
export const MAX_ID = 2 ** 48 - 1;

export const Kind = {
  REQUEST: 1, // id, meta; body per flags
  REPLY: 2, // id, meta; body per flags
  ERROR: 3, // id, meta = wire error; the handler failed before replying
  CHUNK: 4, // id, body = one chunk of a streaming body
  END: 5, // id; the streaming body is complete
  BODY_ERROR: 6, // id, meta = wire error; the streaming body failed midway
  CANCEL: 7, // id; the caller gave up on the request
  CREDIT: 8, // id, meta = bytes; the receiver of a streaming body grants more window
  STOP: 9, // id; the receiver of a streaming body no longer wants it
} as const;

export const Flag = {
  BODY_NONE: 0,
  BODY_SINGLE: 1, // the whole body is in this frame
  BODY_STREAM: 2, // CHUNK frames follow, then END or BODY_ERROR
} as const;

// One Packr for headers only: packing big bodies would grow its shared buffer and slow
// every later small pack. Its output is a view of that shared buffer, so it is copied.
const packr = new Packr({ useRecords: false, copyBuffers: true });

/** Encodes the fixed head plus header; throws FrameTooLargeError above maxFrameBytes. */
export function encodeHead(
  kind: number,
  flags: number,
  id: number,
  meta: unknown,
  bodyBytes: number,
  maxFrameBytes: number,
): Buffer {
  const packed = meta === undefined ? undefined : packr.pack(meta);
  const metaLen = packed === undefined ? 0 : packed.length;
  const length = LENGTH_COVERED + metaLen + bodyBytes;
  if (length > maxFrameBytes) {
    throw new FrameTooLargeError(
      `frame of ${length} bytes (header ${metaLen}, body ${bodyBytes}) exceeds the limit of ${maxFrameBytes}`,
    );
  }
  const head = Buffer.allocUnsafe(HEAD_BYTES + metaLen);
  head.writeUInt32LE(length, 0);
  head[4] = kind;
  head[5] = flags;
  head.writeUIntLE(id, 6, 6);
  head.writeUInt32LE(metaLen, 12);
  if (packed !== undefined) packed.copy(head, HEAD_BYTES);
  return head;
}

export interface FrameSink {
  frame(kind: number, flags: number, id: number, meta: unknown, bodyBytes: number): void;
  body(piece: Buffer): void;
  frameEnd(): void;
}

const S_HEAD = 0;
const S_META = 1;
const S_BODY = 2;

export class FrameDecoder {
  readonly #sink: FrameSink;
  readonly #maxFrameBytes: number;
  #state = S_HEAD;
  #need = HEAD_BYTES; // contiguous bytes wanted in S_HEAD / S_META
  #parts: Buffer[] = [];
  #partBytes = 0;
  #kind = 0;
  #flags = 0;
  #id = 0;
  #bodyLeft = 0;
  #stopped = false;

  constructor(sink: FrameSink, maxFrameBytes: number) {
    this.#sink = sink;
    this.#maxFrameBytes = maxFrameBytes;
  }

  /** After stop(), further input is ignored (the channel is closing). */
  stop(): void {
    this.#stopped = true;
    this.#parts = [];
  }

  /** Feeds one socket chunk; throws FrameTooLargeError / ProtocolError on garbage. */
  push(chunk: Buffer): void {
    let off = 0;
    while (off < chunk.length && !this.#stopped) {
      if (this.#state === S_BODY) {
        const n = Math.min(this.#bodyLeft, chunk.length - off);
        const piece = chunk.subarray(off, off + n);
        off += n;
        this.#bodyLeft -= n;
        this.#sink.body(piece);
        if (this.#bodyLeft === 0) this.#endFrame();
        continue;
      }
      let bytes: Buffer;
      if (this.#partBytes === 0 && chunk.length - off >= this.#need) {
        bytes = chunk.subarray(off, off + this.#need);
        off += this.#need;
      } else {
        const n = Math.min(this.#need - this.#partBytes, chunk.length - off);
        this.#parts.push(Buffer.from(chunk.subarray(off, off + n)));
        this.#partBytes += n;
        off += n;
        if (this.#partBytes < this.#need) break;
        bytes = Buffer.concat(this.#parts, this.#need);
        this.#parts = [];
        this.#partBytes = 0;
      }
      if (this.#state === S_HEAD) this.#onHead(bytes);
      else this.#onMeta(bytes);
    }
  }

  #onHead(b: Buffer): void {
    const length = b.readUInt32LE(0);
    if (length > this.#maxFrameBytes) {
      throw new FrameTooLargeError(
        `received a frame length of ${length} bytes, above the limit of ${this.#maxFrameBytes}: the stream is corrupt`,
      );
    }
    if (length < LENGTH_COVERED)
      throw new ProtocolError(`received a frame length of ${length}, shorter than a frame head`);
    this.#kind = b[4]!;
    this.#flags = b[5]!;
    this.#id = b.readUIntLE(6, 6);
    const metaLen = b.readUInt32LE(12);
    if (metaLen > length - LENGTH_COVERED)
      throw new ProtocolError(`header length ${metaLen} exceeds frame length ${length}`);
    this.#bodyLeft = length - LENGTH_COVERED - metaLen;
    if (metaLen > 0) {
      this.#state = S_META;
      this.#need = metaLen;
    } else {
      this.#startFrame(undefined);
    }
  }

  #onMeta(b: Buffer): void {
    let meta: unknown;
    try {
      meta = packr.unpack(b);
    } catch (err) {
      throw new ProtocolError(`undecodable frame header: ${(err as Error).message}`);
    }
    this.#startFrame(meta);
  }

  #startFrame(meta: unknown): void {
    this.#state = S_BODY;
    this.#sink.frame(this.#kind, this.#flags, this.#id, meta, this.#bodyLeft);
    if (this.#bodyLeft === 0 && !this.#stopped) this.#endFrame();
  }

  #endFrame(): void {
    this.#state = S_HEAD;
    this.#need = HEAD_BYTES;
    this.#sink.frameEnd();
  }
}
