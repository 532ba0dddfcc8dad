// Names on disk: fsync of a directory, so the files created, renamed or removed in it
// survive a crash (a file's own fsync covers its bytes, not its name), and a directory's
// names when it may not exist. Shared by the journal re-shard (sessions/) and the data
// directory's layout (server/host/).
import { open, readdir } from "node:fs/promises";

/** A directory's names, none when it does not exist. */
export async function namesIn(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
}

/** Fsyncs a directory, so the names in it (new files, renames, removals) survive a crash. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
