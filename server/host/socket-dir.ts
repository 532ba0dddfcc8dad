// The host's socket directory, where the workers listen for the router:
// `$TMPDIR/tito-sock-<host pid>-XXXXXX`. A clean shutdown removes it; a host killed with
// SIGKILL cannot, so a starting host sweeps the directories such hosts left behind. A
// directory is stale only when all of these hold: its name has our pattern with a pid,
// that pid is not a live process, it is a real directory of this user, it holds nothing
// but socket files, and no socket in it accepts a connection (a live server in another
// pid namespace sharing the temp dir still answers). Anything else — data directories,
// other files, directories without a pid in the name — is never touched.
import { mkdtempSync } from "node:fs";
import { lstat, readdir, rmdir, unlink } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { processExists } from "./data-dir-lock.ts";

const PREFIX = "tito-sock-";
const STALE_NAME = /^tito-sock-(\d+)-[A-Za-z0-9]{6}$/;

/** A fresh socket directory whose name records this process as its owner. */
export function makeSocketDir(root: string = tmpdir()): string {
  return mkdtempSync(join(root, `${PREFIX}${process.pid}-`));
}

/** Whether something still listens on a Unix socket: only a refused connection says no. */
function socketLive(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(path);
    const done = (live: boolean) => {
      socket.destroy();
      resolve(live);
    };
    socket.setTimeout(1_000, () => done(true)); // no answer is not proof of death
    socket.once("connect", () => done(true));
    socket.once("error", (err: NodeJS.ErrnoException) => done(err.code !== "ECONNREFUSED" && err.code !== "ENOENT"));
  });
}

/** The socket files of `dir`, or undefined when it is not a stale socket directory to remove. */
async function staleSockets(dir: string, uid: number | undefined): Promise<string[] | undefined> {
  const info = await lstat(dir);
  if (!info.isDirectory() || (uid !== undefined && info.uid !== uid)) return undefined;
  const sockets: string[] = [];
  for (const name of await readdir(dir)) {
    const path = join(dir, name);
    if (!(await lstat(path)).isSocket()) return undefined;
    sockets.push(path);
  }
  for (const path of sockets) if (await socketLive(path)) return undefined;
  return sockets;
}

/**
 * Removes the socket directories under `root` whose owner is gone (see the header);
 * returns their paths. Never throws: a directory it cannot judge or remove is left.
 */
export async function sweepStaleSocketDirs(root: string = tmpdir()): Promise<string[]> {
  const removed: string[] = [];
  let names: string[];
  try {
    names = await readdir(root);
  } catch {
    return removed;
  }
  const uid = process.getuid?.();
  for (const name of names) {
    const owner = STALE_NAME.exec(name)?.[1];
    if (owner === undefined) continue;
    const pid = Number(owner);
    if (pid === process.pid || processExists(pid)) continue;
    const dir = join(root, name);
    try {
      const sockets = await staleSockets(dir, uid);
      if (sockets === undefined) continue;
      for (const path of sockets) await unlink(path);
      await rmdir(dir); // fails, and keeps the directory, if anything appeared meanwhile
      removed.push(dir);
    } catch {
      // gone already (another host swept it), or not ours to judge: leave it
    }
  }
  return removed;
}
