// One server per journal directory. Two servers on one --data-dir would append to the
// same shard journals and compact each other's segments, and a restart of either would
// replay a mix: the second refuses to start instead. The lock is a file in the directory
// naming the holder's pid, created exclusively; a lock whose pid no longer exists (its
// host was killed with SIGKILL) is stale and taken over.
import { closeSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { DataDirInUseError } from "./errors.ts";

export const LOCK_FILE = "tito-server.lock";

export interface DataDirLock {
  readonly path: string;
  /** Removes the lock file if it is still this holder's; once. */
  release(): void;
}

interface Holder {
  pid: number;
  instance: string;
}

function readHolder(path: string): Holder | undefined {
  try {
    const held = JSON.parse(readFileSync(path, "utf8")) as Partial<Holder>;
    return Number.isInteger(held.pid) && typeof held.instance === "string" ? (held as Holder) : undefined;
  } catch {
    return undefined; // gone, or cut short by a crash right after it was created
  }
}

/** Whether a process with this pid exists (ours or someone else's). */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM"; // someone else's process
  }
}

/** Takes `dir`'s lock for the server `instance`, or throws DataDirInUseError naming the holder. */
export function lockDataDir(dir: string, instance: string): DataDirLock {
  const path = join(dir, LOCK_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    let fd: number;
    try {
      fd = openSync(path, "wx");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const holder = readHolder(path);
      if (holder !== undefined && processExists(holder.pid)) throw new DataDirInUseError(dir, path, holder.pid);
      rmSync(path, { force: true }); // stale: its holder is gone
      continue;
    }
    try {
      writeSync(fd, `${JSON.stringify({ pid: process.pid, instance })}\n`);
    } finally {
      closeSync(fd);
    }
    let released = false;
    return {
      path,
      release() {
        if (released) return;
        released = true;
        if (readHolder(path)?.instance === instance) rmSync(path, { force: true });
      },
    };
  }
  // Another server took the stale lock between our removal and our create.
  throw new DataDirInUseError(dir, path, readHolder(path)?.pid);
}
