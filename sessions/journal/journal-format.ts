// The byte format of one shard-journal entry, and nothing else: framing, checksums, the
// entry kinds and their small JSON metadata. Record bytes (the request sent upstream and
// the engine's reply) follow the metadata raw, never re-encoded, so a records GET can
// splice them straight from the file. Knows no files, sessions or policies.
//
// entry  = header (16 bytes) + body
// header = magic "TJE1" | u32 body length | u32 crc32(body) | u32 crc32(header bytes 0..12)
// body   = u8 kind | u32 meta length | meta (UTF-8 JSON) | payload (TURN: request, then reply)
// The header has its own checksum so a bad length is told apart from a torn tail.
import { crc32, crc32Combine } from "../../buffers/crc32.ts";
import type { ChatMessage } from "../chat-template.ts";
import type { SessionBudget } from "../budget.ts";
import type { NodeFields, ResumedRecord, SessionMeta } from "./records.ts";

export const HEADER_BYTES = 16;
export const MAGIC = 0x31454a54; // "TJE1" read as little-endian u32
/** Bytes of the body before the metadata: the kind and the metadata length. */
export const BODY_PREFIX_BYTES = 5;
/** The body length field is a u32. */
export const MAX_BODY_BYTES = 0xffffffff;

export const EntryKind = { CREATE: 1, TURN: 2, TRUNCATE: 3, DELETE: 4, FINISH: 5, FORK: 6 } as const;
export type EntryKind = (typeof EntryKind)[keyof typeof EntryKind];

/** What a TURN entry says besides its raw request and reply bytes. */
export interface TurnMeta {
  id: string;
  /** The turn's position: committed turns before it (a later index truncates first). */
  index: number;
  timestamp: number;
  method: string;
  path: string;
  statusCode: number;
  requestBytes: number;
  responseBytes: number;
  /** The engine's completion ids: with the request's input_ids they make the checkpoint. */
  completionIds: readonly number[];
  /** The assistant message as scanned from the reply (the reply is never parsed at replay). */
  assistant: ChatMessage;
  /** The prompt's messages and tools, when the request sent upstream does not carry them. */
  conversation?: { messages: readonly ChatMessage[]; tools?: readonly unknown[] };
  /** The weight version the turn was sent under; absent when none was set (and in journals from before it). */
  weightVersion?: string;
  /** The engine's `meta_info.weight_version`, when it reported one. */
  engineWeightVersion?: string;
  /** "messages" when the turn came through the Anthropic Messages API; absent for chat (and in older journals). */
  clientApi?: "messages";
  /** The turn's node in a tree-mode session (records.ts NodeFields); absent in linear mode (and older journals). */
  node?: NodeFields;
  /** A resumed turn's parts (records.ts); absent for any other turn. */
  resumed?: ResumedRecord;
}

export type EntryMeta =
  // `budget`: the session's (budget.ts), written only when it has one; `trajectory` "tree":
  // a tree-mode session, absent for linear (and in journals from before trees). `root`: its
  // routing key when that is not its own id (a fork a re-shard wrote out whole keeps its
  // root's: reshard-forks.ts); absent otherwise (and in journals from before it).
  | { kind: typeof EntryKind.CREATE; id: string; budget?: SessionBudget; trajectory?: "tree"; root?: string }
  | ({ kind: typeof EntryKind.TURN } & TurnMeta)
  | { kind: typeof EntryKind.TRUNCATE; id: string; count: number }
  // `reason` "expired": idle expiry; absent for a client's DELETE (and in journals from before expiry).
  | { kind: typeof EntryKind.DELETE; id: string; reason?: "expired" }
  // The session was aborted (POST /sessions/{id}/abort): it takes no more turns.
  | { kind: typeof EntryKind.FINISH; id: string }
  // A new session `id` holding the first `count` turns of `parent` (issue 43), whose records it
  // shares: it names no bytes of its own. `root`: the session at the root of its forks.
  // `path` (a fork at a tree-mode node): the parent's record indexes from a root down to the
  // node, `count` of them; the fork holds those, as a tree-mode session (records.ts pathNode).
  | { kind: typeof EntryKind.FORK; id: string; parent: string; count: number; root: string; path?: number[] };

/** The CREATE entry of session `id`: only what it has (a budget with a limit, tree mode, a routing key not its id). */
export function createMeta(id: string, { budget, trajectory, routingKey }: SessionMeta): EntryMeta {
  return {
    kind: EntryKind.CREATE,
    id,
    ...(budget && (budget.maxTotalTokens || budget.maxTurns) ? { budget } : {}),
    ...(trajectory === undefined ? {} : { trajectory }),
    ...(routingKey === undefined || routingKey === id ? {} : { root: routingKey }),
  };
}

/** Payload bytes whose CRC-32 is already known (computed as they arrived): not read again to encode them. */
export interface ChecksummedBytes {
  parts: readonly Buffer[];
  crc: number;
}

/** An encoded entry: the buffers to write in order (payload buffers are not copied). */
export interface EncodedEntry {
  parts: Buffer[];
  bytes: number;
  /** Offset of the payload from the start of the entry. */
  payloadOffset: number;
}

export function encodeEntry(meta: EntryMeta, payload: readonly (Buffer | ChecksummedBytes)[] = []): EncodedEntry {
  const { kind, ...rest } = meta;
  const metaBytes = Buffer.from(JSON.stringify(rest), "utf8");
  const prefix = Buffer.allocUnsafe(BODY_PREFIX_BYTES);
  prefix.writeUInt8(kind, 0);
  prefix.writeUInt32LE(metaBytes.length, 1);
  let bodyBytes = BODY_PREFIX_BYTES + metaBytes.length;
  let crc = crc32(metaBytes, crc32(prefix));
  const parts: Buffer[] = [];
  for (const p of payload) {
    if (Buffer.isBuffer(p)) {
      bodyBytes += p.length;
      crc = crc32(p, crc);
      if (p.length > 0) parts.push(p);
      continue;
    }
    let bytes = 0;
    for (const part of p.parts) {
      bytes += part.length;
      if (part.length > 0) parts.push(part);
    }
    bodyBytes += bytes;
    crc = crc32Combine(crc, p.crc, bytes);
  }
  if (bodyBytes > MAX_BODY_BYTES)
    throw new RangeError(`a journal entry of ${bodyBytes} bytes exceeds the 4 GiB entry limit`);
  const header = Buffer.allocUnsafe(HEADER_BYTES);
  header.writeUInt32LE(MAGIC, 0);
  header.writeUInt32LE(bodyBytes, 4);
  header.writeUInt32LE(crc, 8);
  header.writeUInt32LE(crc32(header.subarray(0, 12)), 12);
  return {
    parts: [header, prefix, metaBytes, ...parts],
    bytes: HEADER_BYTES + bodyBytes,
    payloadOffset: HEADER_BYTES + BODY_PREFIX_BYTES + metaBytes.length,
  };
}

export interface EntryHeader {
  bodyBytes: number;
  bodyCrc: number;
}

/** The header's fields, or undefined when its magic or checksum is wrong. */
export function decodeHeader(header: Buffer): EntryHeader | undefined {
  if (header.length < HEADER_BYTES || header.readUInt32LE(0) !== MAGIC) return undefined;
  if (crc32(header.subarray(0, 12)) !== header.readUInt32LE(12)) return undefined;
  return { bodyBytes: header.readUInt32LE(4), bodyCrc: header.readUInt32LE(8) };
}

/** The metadata of a body whose kind byte and JSON were read; throws on anything malformed. */
export function decodeMeta(kind: number, metaJson: Buffer, payloadBytes: number): EntryMeta {
  const fields = JSON.parse(metaJson.toString("utf8")) as Record<string, unknown>;
  if (typeof fields.id !== "string") throw new Error("metadata without a session id");
  const meta = { kind, ...fields } as EntryMeta;
  switch (meta.kind) {
    case EntryKind.CREATE:
      if (meta.budget !== undefined && (typeof meta.budget !== "object" || meta.budget === null))
        throw new Error("create with a budget that is not an object");
      if (meta.root !== undefined && typeof meta.root !== "string")
        throw new Error("create with a root that is not an id");
      break;
    case EntryKind.DELETE:
    case EntryKind.FINISH:
      break;
    case EntryKind.TRUNCATE:
      if (!Number.isInteger(meta.count) || meta.count < 0) throw new Error("truncate without a count");
      break;
    case EntryKind.FORK:
      if (typeof meta.parent !== "string" || typeof meta.root !== "string") throw new Error("fork without a parent");
      if (!Number.isInteger(meta.count) || meta.count < 1) throw new Error("fork without a turn count");
      if (
        meta.path !== undefined &&
        (!Array.isArray(meta.path) ||
          meta.path.length !== meta.count ||
          !meta.path.every((i) => Number.isInteger(i) && i >= 0))
      )
        throw new Error("fork with a path that is not its count of record indexes");
      break;
    case EntryKind.TURN:
      if (meta.requestBytes + meta.responseBytes !== payloadBytes)
        throw new Error("turn payload lengths do not add up to the body");
      if (!Array.isArray(meta.completionIds) || !meta.assistant)
        throw new Error("turn without completion ids or assistant message");
      break;
    default:
      throw new Error(`unknown entry kind ${kind}`);
  }
  return meta;
}
