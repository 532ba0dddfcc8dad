// The journal record store of one shard: every create, committed turn, rollback and
// delete is an entry appended to the shard's segment files before it is acknowledged;
// replay rebuilds the sessions from them; a records GET streams the stored bytes from the
// files. In memory it keeps, per record, only where its request and reply bytes are (file,
// offset, length), never the bytes. Compaction removes a sealed segment once every
// session with entries in it is deleted; a delete in it that still hides older entries
// of its session elsewhere is first written again at the journal's end. A fork (one entry)
// shares its parent's record locations and uses every segment the parent had then (forkEntry).
import type { Logger } from "pino";
import { JournalCorruptError } from "../errors.ts";
import { createMeta, encodeEntry, EntryKind, type EntryMeta } from "./journal-format.ts";
import { scanSegment, type ScannedEntry } from "./journal-reader.ts";
import { Segment, SegmentLog, type SegmentLogOptions } from "./journal-segments.ts";
import {
  recordEnd,
  recordHead,
  recordMiddle,
  recordSeparator,
  type DeleteReason,
  type RecordFields,
  type RecordStore,
  type ReplayVisitor,
  type SessionMeta,
  type TurnRecord,
  type TurnState,
  requestParts,
} from "./records.ts";
import { RecordStream, type BodyPart } from "./record-stream.ts";
import assert from "node:assert";
import { forkEntry, kill, note, SessionEntry, type RecordLocation } from "./journal-entry.ts";

/** The segment log's options (this shard's directory, fsync policy, rotation size, spares); the store handles sealing itself. */
export type JournalStoreOptions = Omit<SegmentLogOptions, "onSealed">;

const LIST_CHUNK_BYTES = 16 * 1024 * 1024;

export class JournalRecordStore implements RecordStore {
  /** Replies are written to the journal and dropped; only their place in it is kept. */
  readonly retainsReplyBuffers = false;
  readonly #sessions = new Map<string, SessionEntry>();
  readonly #log: SegmentLog;
  readonly #logger?: Logger;
  #compaction: Promise<void> = Promise.resolve();

  private constructor(log: SegmentLog, logger?: Logger) {
    this.#log = log;
    this.#logger = logger;
  }

  static async open(options: JournalStoreOptions): Promise<JournalRecordStore> {
    let store: JournalRecordStore | undefined;
    const log = await SegmentLog.open({ ...options, onSealed: (segment) => void store?.compact([segment]) });
    store = new JournalRecordStore(log, options.logger);
    return store;
  }

  /** The segment files kept now (tests and operators watch compaction with it). */
  segmentPaths(): string[] {
    return this.#log.segments().map((s) => s.path);
  }

  /** Removed segments' files kept for reuse (not part of the journal: replay ignores them). */
  sparePaths(): string[] {
    return this.#log.sparePaths();
  }

  async recover(visitor: ReplayVisitor): Promise<void> {
    for (const segment of this.#log.segments()) {
      const result = await scanSegment(segment.path, segment.fh, (entry) => this.#replay(segment, entry, visitor));
      if (result.torn !== undefined) {
        this.#logger?.warn(
          { path: segment.path, offset: result.end },
          `journal: dropped a torn last entry (${result.torn})`,
        );
        await this.#log.cut(segment, result.end);
      } else {
        segment.size = result.end;
      }
    }
    await this.compact(this.#log.segments());
  }

  async open(sessionId: string, meta: SessionMeta = {}): Promise<void> {
    const { segment } = await this.#log.append(encodeEntry(createMeta(sessionId, meta)));
    const entry = new SessionEntry(sessionId);
    this.#sessions.set(sessionId, entry);
    note(entry, segment);
  }

  async append(sessionId: string, record: TurnRecord, turn: TurnState): Promise<void> {
    const entry = this.#live(sessionId);
    const responseBytes = record.response.reduce((n, b) => n + b.length, 0);
    const request = requestParts(record);
    const requestBytes = request.reduce((n, b) => n + b.length, 0);
    const meta: EntryMeta = {
      kind: EntryKind.TURN,
      id: sessionId,
      index: turn.index,
      timestamp: record.timestamp,
      method: record.method,
      path: record.path,
      statusCode: record.statusCode,
      requestBytes,
      responseBytes,
      completionIds: turn.completionIds,
      assistant: turn.assistant,
      ...(turn.conversation === undefined ? {} : { conversation: turn.conversation }),
      // Written only when set, so a turn without them is the entry older code wrote.
      ...(typeof record.weightVersion === "string" ? { weightVersion: record.weightVersion } : {}),
      ...(record.engineWeightVersion === undefined ? {} : { engineWeightVersion: record.engineWeightVersion }),
      ...(turn.clientApi === undefined ? {} : { clientApi: turn.clientApi }),
      ...(record.node === undefined ? {} : { node: record.node }),
      ...(record.resumed === undefined ? {} : { resumed: record.resumed }),
    };
    const response =
      record.responseCrc === undefined ? record.response : [{ parts: record.response, crc: record.responseCrc }];
    const encoded = encodeEntry(meta, [...request, ...response]);
    const { segment, offset } = await this.#log.append(encoded);
    if (entry.records.length > turn.index) entry.records.length = turn.index;
    // concat, not push: exactly its records, no spare slots (trajectory.ts restore says why).
    entry.records = entry.records.concat([
      {
        ...locationFields(record),
        segment,
        requestAt: offset + encoded.payloadOffset,
        requestBytes,
        responseBytes,
      },
    ]);
    note(entry, segment);
  }

  async finish(sessionId: string): Promise<void> {
    const entry = this.#live(sessionId);
    const { segment } = await this.#log.append(encodeEntry({ kind: EntryKind.FINISH, id: sessionId }));
    note(entry, segment);
  }

  async truncate(sessionId: string, count: number): Promise<void> {
    const entry = this.#live(sessionId);
    if (entry.records.length <= count) return;
    const { segment } = await this.#log.append(encodeEntry({ kind: EntryKind.TRUNCATE, id: sessionId, count }));
    entry.records.length = count;
    note(entry, segment);
  }

  async drop(sessionId: string, reason?: DeleteReason): Promise<void> {
    const entry = this.#live(sessionId);
    const { segment } = await this.#log.append(encodeEntry(deleteMeta(sessionId, reason)));
    kill(entry, segment, reason);
    await this.compact([...entry.segments, segment]);
  }

  async fork(
    parentId: string,
    sessionId: string,
    count: number,
    routingKey: string,
    path?: readonly number[],
  ): Promise<void> {
    const parent = this.#live(parentId);
    const meta: EntryMeta = {
      kind: EntryKind.FORK,
      id: sessionId,
      parent: parentId,
      count,
      root: routingKey,
      ...(path === undefined ? {} : { path: [...path] }),
    };
    const { segment } = await this.#log.append(encodeEntry(meta));
    this.#sessions.set(sessionId, forkEntry(sessionId, parent, count, segment, path));
  }

  async list(sessionId: string): Promise<TurnRecord[]> {
    const locations = [...this.#live(sessionId).records];
    const pinned = this.#pin(locations);
    try {
      const out: TurnRecord[] = [];
      for (const loc of locations) {
        const request = await readRange(loc.segment, loc.requestAt, loc.requestBytes);
        const response: Buffer[] = [];
        for (let at = 0; at < loc.responseBytes; at += LIST_CHUNK_BYTES) {
          response.push(
            await readRange(
              loc.segment,
              loc.requestAt + loc.requestBytes + at,
              Math.min(LIST_CHUNK_BYTES, loc.responseBytes - at),
            ),
          );
        }
        out.push({ ...locationFields(loc), request, response });
      }
      return out;
    } finally {
      for (const s of pinned) this.#log.unpin(s);
    }
  }

  body(sessionId: string, head: Buffer, tail: Buffer): Buffer[] | AsyncIterable<Buffer> {
    const locations = [...this.#live(sessionId).records];
    if (locations.length === 0) return [head, tail];
    const parts: BodyPart[] = [head];
    locations.forEach((loc, i) => {
      if (i > 0) parts.push(recordSeparator);
      parts.push(recordHead(loc), { segment: loc.segment, position: loc.requestAt, length: loc.requestBytes });
      parts.push(
        recordMiddle,
        { segment: loc.segment, position: loc.requestAt + loc.requestBytes, length: loc.responseBytes },
        recordEnd,
      );
    });
    parts.push(tail);
    const pinned = this.#pin(locations);
    return new RecordStream(parts, () => {
      for (const s of pinned) this.#log.unpin(s);
    });
  }

  async close(): Promise<void> {
    await this.#log.close();
  }

  /**
   * Removes every candidate segment nothing needs any more, and whatever that frees in turn;
   * one run at a time. Never rejects: a failure (logged) only keeps segments longer.
   */
  compact(candidates: Iterable<Segment>): Promise<void> {
    const list = [...candidates];
    this.#compaction = this.#compaction
      .then(() => this.#compact(list))
      .catch((err) => this.#logger?.error({ err }, "journal compaction failed; segments are kept"));
    return this.#compaction;
  }

  /** Resolves once the compaction runs started so far are over. */
  idle(): Promise<void> {
    return this.#compaction;
  }

  async #compact(queue: Segment[]): Promise<void> {
    while (queue.length > 0) {
      const segment = queue.pop()!;
      if (segment.removed || !(await this.#freeable(segment))) continue;
      const removing = this.#log.remove(segment);
      for (const user of segment.data as Set<SessionEntry>) {
        user.segments.delete(segment);
        if (user.segments.size > 0) continue;
        // Its entries are all gone: its delete entry no longer hides anything.
        if (this.#sessions.get(user.id) === user) this.#sessions.delete(user.id);
        if (user.tombstone && user.tombstone !== segment) queue.push(user.tombstone);
      }
      await removing;
      this.#logger?.debug({ path: segment.path }, "journal: removed a segment of deleted sessions");
    }
  }

  /** Whether a segment holds nothing live; deletes it must keep are first moved to the journal's end. */
  async #freeable(segment: Segment): Promise<boolean> {
    if (segment === this.#log.active) return false;
    for (const user of segment.data) if (!user.dead) return false;
    // A delete must outlive every older entry of its session, or replay would revive it.
    for (const user of [...segment.tombstones] as SessionEntry[]) {
      if (![...user.segments].some((other) => other !== segment)) continue;
      // The id was created again since: a delete written now would hit the new session.
      if (this.#sessions.get(user.id) !== user) return false;
      const { segment: to } = await this.#log.append(encodeEntry(deleteMeta(user.id, user.reason)));
      segment.tombstones.delete(user);
      user.tombstone = to;
      to.tombstones.add(user);
    }
    return !segment.removed && segment !== this.#log.active;
  }

  #replay(segment: Segment, scanned: ScannedEntry, visitor: ReplayVisitor): void {
    const { meta } = scanned;
    let entry = this.#sessions.get(meta.id);
    if (meta.kind === EntryKind.CREATE) {
      if (entry && !entry.dead)
        throw new JournalCorruptError(segment.path, scanned.offset, `session ${meta.id} created twice`);
      entry = new SessionEntry(meta.id);
      this.#sessions.set(meta.id, entry);
      note(entry, segment);
      visitor.created(meta.id, {
        ...(meta.budget ? { budget: meta.budget } : {}),
        ...(meta.trajectory === "tree" ? { trajectory: "tree" as const } : {}),
        ...(meta.root === undefined ? {} : { routingKey: meta.root }),
      });
      return;
    }
    if (meta.kind === EntryKind.FORK) {
      const parent = this.#sessions.get(meta.parent);
      const has = (n: number) => parent !== undefined && parent.records.length >= n;
      if (
        (entry && !entry.dead) ||
        !parent ||
        parent.dead ||
        !has(meta.count) ||
        !has(Math.max(...(meta.path ?? [0])) + 1)
      )
        throw new JournalCorruptError(segment.path, scanned.offset, `fork ${meta.id}: id taken or parent turn missing`);
      this.#sessions.set(meta.id, forkEntry(meta.id, parent, meta.count, segment, meta.path));
      visitor.forked(meta.id, meta.parent, meta.count, meta.path);
      return;
    }
    if (meta.kind === EntryKind.DELETE) {
      const reason = meta.reason === "expired" ? meta.reason : undefined;
      // A delete whose session left nothing behind (its entries were compacted) is moot,
      // but an expiry is still worth remembering: a later request hears "expired".
      if (!entry) {
        if (reason) visitor.deleted(meta.id, reason);
        return;
      }
      if (!entry.dead) visitor.deleted(meta.id, reason);
      kill(entry, segment, reason);
      return;
    }
    if (!entry) {
      // Entries of a deleted session whose create was compacted away: kept for bookkeeping only.
      entry = new SessionEntry(meta.id);
      entry.dead = true;
      this.#sessions.set(meta.id, entry);
    }
    note(entry, segment);
    if (entry.dead) return;
    if (meta.kind === EntryKind.FINISH) {
      visitor.finished?.(meta.id);
      return;
    }
    if (meta.kind === EntryKind.TRUNCATE) {
      if (entry.records.length > meta.count) entry.records.length = meta.count;
      visitor.truncated(meta.id, meta.count);
      return;
    }
    assert.ok(scanned.request, "a scanned turn carries its request");
    if (entry.records.length > meta.index) entry.records.length = meta.index;
    entry.records = entry.records.concat([
      {
        ...locationFields(meta),
        segment,
        requestAt: scanned.payloadOffset,
        requestBytes: meta.requestBytes,
        responseBytes: meta.responseBytes,
      },
    ]);
    visitor.committed(meta.id, {
      index: meta.index,
      completionIds: meta.completionIds,
      assistant: meta.assistant,
      conversation: meta.conversation,
      clientApi: meta.clientApi,
      node: meta.node,
      request: scanned.request,
      timestamp: meta.timestamp,
      weightVersion: meta.weightVersion,
      resumed: meta.resumed,
    });
  }

  #live(sessionId: string): SessionEntry {
    const entry = this.#sessions.get(sessionId);
    assert.ok(entry && !entry.dead, `no journal records open for session ${sessionId}`);
    return entry;
  }

  #pin(locations: readonly RecordLocation[]): Set<Segment> {
    const segments = new Set(locations.map((l) => l.segment));
    for (const s of segments) this.#log.pin(s);
    return segments;
  }
}

function deleteMeta(id: string, reason: DeleteReason | undefined): EntryMeta {
  return reason === undefined ? { kind: EntryKind.DELETE, id } : { kind: EntryKind.DELETE, id, reason };
}

/** A record's fields as kept beside its location; a version of the wrong type (not ours) reads as none. */
function locationFields(r: RecordFields): RecordFields {
  const fields: RecordFields = { timestamp: r.timestamp, method: r.method, path: r.path, statusCode: r.statusCode };
  if (typeof r.weightVersion === "string") fields.weightVersion = r.weightVersion;
  if (typeof r.engineWeightVersion === "string") fields.engineWeightVersion = r.engineWeightVersion;
  if (r.node !== undefined) fields.node = r.node;
  if (r.resumed !== undefined) fields.resumed = r.resumed;
  return fields;
}

async function readRange(segment: Segment, position: number, length: number): Promise<Buffer> {
  const out = Buffer.allocUnsafe(length);
  for (let done = 0; done < length;) {
    const { bytesRead } = await segment.fh.read(out, done, length - done, position + done);
    if (bytesRead === 0)
      throw new Error(`journal segment ${segment.path} ended at ${position + done}, inside a record`);
    done += bytesRead;
  }
  return out;
}
