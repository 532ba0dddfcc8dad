// Reads one journal segment front to back for replay: checks every entry's header and
// body checksums, hands each whole entry to a callback (a TURN's request bytes included,
// its reply bytes only checksummed, never held), and tells a torn tail (a crash mid-write:
// dropped, never fatal) from corruption in the middle (JournalCorruptError with the path
// and byte offset). It never writes; the caller decides what to cut off.
import type { FileHandle } from "node:fs/promises";
import { JournalCorruptError } from "../errors.ts";
import { crc32 } from "../../buffers/crc32.ts";
import {
  BODY_PREFIX_BYTES,
  decodeHeader,
  decodeMeta,
  EntryKind,
  HEADER_BYTES,
  type EntryMeta,
} from "./journal-format.ts";

const CHUNK_BYTES = 1024 * 1024;

export interface ScannedEntry {
  meta: EntryMeta;
  /** Where the entry starts in the file. */
  offset: number;
  /** Where it ends (the next entry's offset): the entry is the bytes [offset, end). */
  end: number;
  /** Absolute file offset of the payload (a TURN's request; its reply follows). */
  payloadOffset: number;
  /** A TURN's request bytes (replay rebuilds the trajectory from them). */
  request?: Buffer;
}

export interface ScanResult {
  /** Where the last whole entry ends: appending may go on from here. */
  end: number;
  /** Set when bytes after `end` were a torn entry. */
  torn?: string;
}

async function readAt(fh: FileHandle, position: number, length: number): Promise<Buffer> {
  const out = Buffer.allocUnsafe(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await fh.read(out, done, length - done, position + done);
    if (bytesRead === 0) throw new Error(`unexpected end of file at ${position + done}`);
    done += bytesRead;
  }
  return out;
}

async function onlyZerosFrom(fh: FileHandle, from: number, size: number, scratch: Buffer): Promise<boolean> {
  for (let at = from; at < size;) {
    const n = Math.min(scratch.length, size - at);
    const { bytesRead } = await fh.read(scratch, 0, n, at);
    if (bytesRead === 0) return true;
    for (let i = 0; i < bytesRead; i++) if (scratch[i] !== 0) return false;
    at += bytesRead;
  }
  return true;
}

/** Scans `fh` (the segment at `path`) and calls `onEntry` for every whole entry in order. */
export async function scanSegment(
  path: string,
  fh: FileHandle,
  onEntry: (entry: ScannedEntry) => void | Promise<void>,
): Promise<ScanResult> {
  const size = (await fh.stat()).size;
  const scratch = Buffer.allocUnsafe(CHUNK_BYTES);
  let offset = 0;
  while (offset < size) {
    if (size - offset < HEADER_BYTES) return { end: offset, torn: `a partial entry header of ${size - offset} bytes` };
    const header = decodeHeader(await readAt(fh, offset, HEADER_BYTES));
    if (!header) {
      // A crash can leave zero-filled blocks at the tail (the size grew before the data landed).
      if (await onlyZerosFrom(fh, offset, size, scratch)) return { end: offset, torn: `${size - offset} zero bytes` };
      throw new JournalCorruptError(path, offset, "bad entry header (magic or header checksum)");
    }
    const end = offset + HEADER_BYTES + header.bodyBytes;
    if (end > size)
      return { end: offset, torn: `an entry of ${header.bodyBytes} bytes cut at ${size - offset - HEADER_BYTES}` };
    const bodyAt = offset + HEADER_BYTES;
    const badBody = (reason: string, cause?: unknown): ScanResult => {
      // The last entry of the file may be torn in any way; one with entries after it is corrupt.
      if (end === size) return { end: offset, torn: `the last entry fails its checks (${reason})` };
      throw new JournalCorruptError(path, offset, reason, { cause });
    };
    if (header.bodyBytes < BODY_PREFIX_BYTES) return badBody("body shorter than its prefix");
    const prefix = await readAt(fh, bodyAt, BODY_PREFIX_BYTES);
    const metaBytes = prefix.readUInt32LE(1);
    if (BODY_PREFIX_BYTES + metaBytes > header.bodyBytes)
      return badBody(`metadata length ${metaBytes} overruns the body`);
    const metaJson = await readAt(fh, bodyAt + BODY_PREFIX_BYTES, metaBytes);
    let crc = crc32(metaJson, crc32(prefix));
    const payloadOffset = bodyAt + BODY_PREFIX_BYTES + metaBytes;
    let meta: EntryMeta | undefined;
    let metaError: unknown;
    try {
      meta = decodeMeta(prefix.readUInt8(0), metaJson, end - payloadOffset);
    } catch (err) {
      metaError = err;
    }
    let request: Buffer | undefined;
    let at = payloadOffset;
    if (meta?.kind === EntryKind.TURN) {
      request = await readAt(fh, at, meta.requestBytes);
      crc = crc32(request, crc);
      at += request.length;
    }
    // The rest (a TURN's reply) is only checksummed, through one reusable buffer.
    while (at < end) {
      const n = Math.min(scratch.length, end - at);
      const { bytesRead } = await fh.read(scratch, 0, n, at);
      if (bytesRead === 0) return badBody("the file ended inside the entry");
      crc = crc32(bytesRead === scratch.length ? scratch : scratch.subarray(0, bytesRead), crc);
      at += bytesRead;
    }
    if (crc !== header.bodyCrc) return badBody("body checksum mismatch");
    // A whole entry with a good checksum and bad metadata was written wrong: never "torn".
    if (!meta)
      throw new JournalCorruptError(path, offset, `unreadable metadata: ${(metaError as Error)?.message}`, {
        cause: metaError,
      });
    await onEntry({ meta, offset, end, payloadOffset, request });
    offset = end;
  }
  return { end: offset };
}
