// Listening on and connecting to a Unix socket path, yielding Channels. The listener
// owns its socket file: it removes a stale one first (never a live one, never a
// non-socket file), restricts it to the owner (0600) and deletes it on close.

import { chmod, lstat, rm } from "node:fs/promises";
import { createConnection, createServer, type Socket } from "node:net";
import { Channel, type ChannelOptions } from "./channel.ts";
import { SocketInUseError } from "./errors.ts";
import { ReadSlabs } from "./read-slabs.ts";

export interface ChannelServer {
  readonly path: string;
  /** Stops listening, closes every accepted channel and removes the socket file. */
  close(): Promise<void>;
}

export async function listenChannels(
  socketPath: string,
  onChannel: (ch: Channel) => void,
  options: ChannelOptions = {},
): Promise<ChannelServer> {
  await removeStaleSocket(socketPath);
  const channels = new Set<Channel>();
  const server = createServer((socket) => {
    const ch = new Channel(socket, { ...options, initiator: false });
    channels.add(ch);
    ch.onClose(() => channels.delete(ch));
    onChannel(ch);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => {
      server.off("error", reject);
      resolve();
    });
  });
  await chmod(socketPath, 0o600);
  let closing: Promise<void> | undefined;
  return {
    path: socketPath,
    close() {
      closing ??= (async () => {
        const done = new Promise<void>((resolve) => server.close(() => resolve()));
        for (const ch of channels) ch.close();
        await done;
        await rm(socketPath, { force: true });
      })();
      return closing;
    },
  };
}

/**
 * Connects to a listener. The socket reads into pooled slabs (read-slabs.ts): the pieces
 * of the bodies it receives carry a release (buffers/release.ts) that a consumer done
 * with them may call, so their memory is reused; one that does not call it loses nothing.
 */
export async function connectChannel(socketPath: string, options: ChannelOptions = {}): Promise<Channel> {
  const reads = new ReadSlabs();
  const socket = await connectSocket(socketPath, reads);
  return new Channel(socket, { ...options, initiator: true, reads });
}

function connectSocket(socketPath: string, reads?: ReadSlabs): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(
      reads === undefined ? { path: socketPath } : { path: socketPath, onread: reads.onread() },
    );
    socket.once("connect", () => {
      socket.off("error", reject);
      resolve(socket);
    });
    socket.once("error", reject);
  });
}

async function removeStaleSocket(socketPath: string): Promise<void> {
  let isSocket: boolean;
  try {
    isSocket = (await lstat(socketPath)).isSocket();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  if (!isSocket) throw new SocketInUseError(`${socketPath} exists and is not a socket; refusing to remove it`);
  try {
    const probe = await connectSocket(socketPath);
    probe.destroy();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ECONNREFUSED" || code === "ENOENT") return void (await rm(socketPath, { force: true }));
    throw err;
  }
  throw new SocketInUseError(`a server is already listening on ${socketPath}`);
}
