// The journal's layout in a --data-dir across worker counts. A session's shard is its
// hash modulo the worker count, so a journal written by M workers is wrong for N: most
// sessions would sit in a shard that is never asked for them (404). The data dir records
// the count its shards were written for (`tito-journal.json`); on a start with another
// count the journal is re-sharded first, crash-safely:
//   1. the new shards are written completely into `reshard-N/` and fsynced (a child job,
//      server/worker/reshard-main.ts; the old shards are only read);
//   2. the record becomes {"workers": N, "pending": "reshard-N"}: written to a temporary
//      file, fsynced and renamed over the old record, this is the commit point;
//   3. roll forward: the old `shard-*` directories are removed, the new ones renamed into
//      place, the record rewritten as {"workers": N}, `reshard-N/` removed.
// A crash before 2 leaves the old shards and record untouched (the half-written
// `reshard-*` is removed at the next start); a crash after 2 is finished by the next start,
// which redoes 3 (each step is safe to repeat: the old shards are removed only while every
// new one is still in `reshard-N/`). A data dir without a record (written before the
// record existed) is re-sharded once, whatever its shard count, so sessions left in the
// wrong shard by an earlier change of --workers are found again; but not one with only
// shard-0 started with one worker, where every session already is where it is looked for.
import { open, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { fsyncDir, namesIn } from "../../buffers/fsync.ts";
import { DataDirLayoutError } from "./errors.ts";

export const LAYOUT_FILE = "tito-journal.json";

interface Layout {
  /** The worker count the `shard-*` directories were written for. */
  workers: number;
  /** Set between the commit of a re-shard and its roll-forward: the directory with the new shards. */
  pending?: string;
}

/** What the re-shard job gets: the old shards' directories, the new shards' directory, both counts. */
export interface ReshardJob {
  sources: string[];
  target: string;
  from: number;
  workers: number;
}

const SHARD_DIR = /^shard-(\d+)$/;
const RESHARD_DIR = /^reshard-\d+$/;

async function readLayout(dataDir: string): Promise<Layout | undefined> {
  const path = join(dataDir, LAYOUT_FILE);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  let layout: Partial<Layout> | undefined;
  try {
    layout = JSON.parse(text) as Partial<Layout>;
  } catch {
    layout = undefined;
  }
  const pending = layout?.pending;
  if (
    !layout ||
    !Number.isInteger(layout.workers) ||
    layout.workers! < 1 ||
    (pending !== undefined && (typeof pending !== "string" || !RESHARD_DIR.test(pending)))
  )
    throw new DataDirLayoutError(
      `${path} is not a journal layout record (${JSON.stringify(text.slice(0, 100))}); it must say {"workers": N} for the N workers that wrote the shard-* directories beside it`,
    );
  return layout as Layout;
}

/** Replaces the record atomically: a temporary file, fsynced, renamed over it, the rename fsynced. */
async function writeLayout(dataDir: string, layout: Layout): Promise<void> {
  const path = join(dataDir, LAYOUT_FILE);
  const fh = await open(`${path}.tmp`, "w");
  try {
    await fh.writeFile(`${JSON.stringify(layout)}\n`);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(`${path}.tmp`, path);
  await fsyncDir(dataDir);
}

const shardDirs = (names: string[]) => names.filter((name) => SHARD_DIR.test(name));

/** Step 3: the committed shards in `pending` take the place of the old ones. */
async function rollForward(dataDir: string, workers: number, pending: string): Promise<void> {
  const from = join(dataDir, pending);
  const incoming = shardDirs(await namesIn(from));
  // Every new shard still waiting means none was moved yet: every shard-* in place is old.
  if (incoming.length === workers) {
    for (const name of shardDirs(await namesIn(dataDir))) await rm(join(dataDir, name), { recursive: true });
    await fsyncDir(dataDir);
  }
  for (const name of incoming) await rename(join(from, name), join(dataDir, name));
  await fsyncDir(dataDir);
  await writeLayout(dataDir, { workers });
  await rm(from, { recursive: true, force: true });
}

/**
 * Makes `dataDir`'s journal right for `workers`: finishes a committed re-shard, removes an
 * uncommitted one, re-shards when the recorded count differs (or no count is recorded and
 * shards exist), and records the count. Resolves with the count re-sharded from, if any.
 */
export async function prepareJournal(
  dataDir: string,
  workers: number,
  reshard: (job: ReshardJob) => Promise<void>,
): Promise<{ reshardedFrom?: number }> {
  let layout = await readLayout(dataDir);
  if (layout?.pending !== undefined) {
    await rollForward(dataDir, layout.workers, layout.pending);
    layout = { workers: layout.workers };
  }
  for (const name of await namesIn(dataDir))
    if (RESHARD_DIR.test(name)) await rm(join(dataDir, name), { recursive: true, force: true });
  const old = shardDirs(await namesIn(dataDir)).map((name) => Number(SHARD_DIR.exec(name)![1]));
  const from = layout?.workers ?? (old.length > 0 ? Math.max(...old) + 1 : undefined);
  // One worker and only shard-0: every session is where one worker looks, whatever wrote
  // it; a re-shard would copy the whole journal onto itself.
  const nothingToMove = workers === 1 && old.length === 1 && old[0] === 0;
  if (from === undefined || (from === workers && (layout !== undefined || nothingToMove))) {
    if (layout?.workers !== workers) await writeLayout(dataDir, { workers });
    return {};
  }
  const pending = `reshard-${workers}`;
  const sources = Array.from({ length: from }, (_, i) => join(dataDir, `shard-${i}`));
  try {
    await reshard({ sources, target: join(dataDir, pending), from, workers });
  } catch (err) {
    await rm(join(dataDir, pending), { recursive: true, force: true });
    throw new DataDirLayoutError(
      `the journal in ${dataDir} was written by ${from} worker(s) and could not be re-sharded for ${workers}: ${(err as Error).message}. Nothing was changed: start with --workers ${from} (workers: ${from}) to use it as it is`,
      { cause: err },
    );
  }
  await writeLayout(dataDir, { workers, pending }); // the commit point
  await rollForward(dataDir, workers, pending);
  return { reshardedFrom: from };
}
