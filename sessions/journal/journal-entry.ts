// What the shard journal keeps in memory per session (journal-store.ts): where each of its
// records lies in the segments, which segments it uses, and its delete entry once dead.
import { pathNode, type DeleteReason, type RecordFields } from "./records.ts";
import type { Segment, SegmentUser } from "./journal-segments.ts";

export interface RecordLocation extends RecordFields {
  segment: Segment;
  /** Absolute offset of the request bytes; the reply bytes follow them. */
  requestAt: number;
  requestBytes: number;
  responseBytes: number;
}

export class SessionEntry implements SegmentUser {
  dead = false;
  readonly segments = new Set<Segment>();
  records: RecordLocation[] = [];
  /** The segment holding this session's delete entry. */
  tombstone: Segment | undefined;
  /** Why it was deleted; a delete entry written again keeps it. */
  reason: DeleteReason | undefined;
  constructor(readonly id: string) {}
}

export function note(entry: SessionEntry, segment: Segment): void {
  entry.segments.add(segment);
  segment.data.add(entry);
}

/**
 * A fork's entry: its parent's first `count` record locations (with `path`: those of a
 * tree-mode node's path, renumbered: records.ts pathNode), and a user of every segment the
 * parent's history is in.
 */
export function forkEntry(
  id: string,
  parent: SessionEntry,
  count: number,
  segment: Segment,
  path?: readonly number[],
): SessionEntry {
  const entry = new SessionEntry(id);
  entry.records = path
    ? path.map((index, i) => ({ ...parent.records[index]!, node: pathNode(parent.records[index]!.node, i) }))
    : parent.records.slice(0, count);
  for (const s of parent.segments) note(entry, s);
  note(entry, segment);
  return entry;
}

export function kill(entry: SessionEntry, tombstone: Segment, reason: DeleteReason | undefined): void {
  entry.dead = true;
  entry.records = [];
  entry.tombstone = tombstone;
  entry.reason = reason;
  tombstone.tombstones.add(entry);
}
