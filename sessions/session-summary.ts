// What the session listing says about each session when asked for details (GET
// /sessions?detail=1, docs/http.md): the facts the viewer's sessions list shows (docs/viewer.md),
// read from the trajectory in memory, never from the records on disk. The drift flags need a
// re-render and a tokenization of the session (drift.ts), so only a detailed listing pays for them.
import type { Mismatch, MismatchType } from "./drift.ts";
import type { TokenizerFolder } from "./tokenizer-folder.ts";
import type { SessionRegistry } from "./registry.ts";
import type { Trajectory } from "./trajectory.ts";

export interface SessionSummary {
  session_id: string;
  /** The TITO family the session follows (the server's). */
  family: string;
  /** Committed turns. */
  turns: number;
  /** Token ids of the trajectory (the last turn's prompt plus its completion). */
  tokens: number;
  /** The last committed turn's commit time, Unix seconds; null before the first turn. */
  last_activity: number | null;
  /** The distinct weight versions its turns were sent under, in turn order (null: before any was set). */
  weight_versions: (string | null)[];
  /** The distinct types of its drift report (`tito_session_mismatch`); [] without drift or turns; null when it could not be computed. */
  drift: MismatchType[] | null;
}

/** One page of the listing: ids, or summaries when asked for details. */
export interface ListPage {
  sessions: string[] | SessionSummary[];
  more: boolean;
}

export interface ListOptions {
  /** Summaries instead of ids. */
  detail?: boolean;
  /** Only the ids that start with it. */
  prefix?: string;
}

/** Up to `limit` live ids greater than `after` (and starting with `prefix`), in id order, and whether more follow. */
export function listPage(
  registry: SessionRegistry,
  after: string,
  limit: number,
  { detail = false, prefix = "" }: ListOptions,
  summary: (t: Trajectory) => SessionSummary,
): ListPage {
  const ids: string[] = [];
  for (const id of registry.ids()) if (id > after && id.startsWith(prefix)) ids.push(id);
  ids.sort();
  const page = ids.slice(0, limit);
  return { sessions: detail ? page.map((id) => summary(registry.get(id))) : page, more: ids.length > limit };
}

export function summarize(t: Trajectory, family: string, drift: () => Mismatch[]): SessionSummary {
  let types: MismatchType[] | null = [];
  if (t.assistantCount > 0) {
    try {
      types = [...new Set(drift().map((m) => m.type))];
    } catch {
      // A render the drift report cannot make is a failure of GET /sessions/{id} too; the listing does not hide the session for it.
      types = null;
    }
  }
  return {
    session_id: t.id,
    family,
    turns: t.assistantCount,
    tokens: t.checkpoints.count === 0 ? 0 : t.checkpoints.lengthOf(t.checkpoints.count - 1),
    last_activity: t.lastCommitAt,
    weight_versions: t.weightVersions,
    drift: types,
  };
}

// Decoded texts of single ids, per tokenizer folder: a trajectory repeats a few thousand
// distinct ids, so a 100k-token sample decodes each only once.
const textCache = new WeakMap<TokenizerFolder, Map<number, string>>();

/**
 * Each id decoded alone, special tokens kept (POST /sessions/{id}/samples?token_text=1). A
 * byte-level BPE id that holds part of a UTF-8 character decodes to U+FFFD on its own:
 * the texts are for showing tokens, and joined they need not equal the decoded sequence.
 */
export function tokenTexts(folder: TokenizerFolder, ids: readonly number[]): string[] {
  let cache = textCache.get(folder);
  if (!cache) textCache.set(folder, (cache = new Map()));
  return ids.map((id) => {
    let text = cache.get(id);
    if (text === undefined) cache.set(id, (text = folder.decode([id])));
    return text;
  });
}
