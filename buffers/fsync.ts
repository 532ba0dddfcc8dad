// Durability of names on disk: fsync of a directory, so the files created, renamed or
// removed in it survive a crash (a file's own fsync covers its bytes, not its name).
// Shared by the journal re-shard (sessions/) and the data directory's layout (server/host/).
import { open } from "node:fs/promises";

/** Fsyncs a directory, so the names in it (new files, renames, removals) survive a crash. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
