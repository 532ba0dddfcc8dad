// How many TCP connections a process holds open, read from Linux's /proc: its socket fds
// whose inode is in /proc/net/tcp or tcp6 (so Unix sockets, IPC and the workers' channels,
// do not count). Tests use it to see that handed-off connections are closed, not kept.
import { readdirSync, readFileSync, readlinkSync } from "node:fs";

export function tcpSockets(pid: number): number {
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"])
    for (const line of readOr(table).split("\n").slice(1)) {
      const inode = line.trim().split(/\s+/)[9];
      if (inode) inodes.add(inode);
    }
  let n = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m && inodes.has(m[1]!)) n++;
    } catch {
      // closed while we looked
    }
  }
  return n;
}

/** Polls `read` every 50 ms until no count is above its `bound`, or 10 s; returns the last reading. */
export async function settle<T extends Record<string, number>>(read: () => T, bound: T): Promise<T> {
  const deadline = Date.now() + 10_000;
  let last = read();
  while (Object.keys(bound).some((k) => last[k]! > bound[k]!) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    last = read();
  }
  return last;
}

function readOr(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}
