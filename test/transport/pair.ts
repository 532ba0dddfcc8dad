// Test helpers (not a test file): a temp dir per suite and a connected channel pair
// over a real Unix socket, closed by the suite's after hook.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  connectChannel,
  listenChannels,
  type Channel,
  type ChannelOptions,
  type ChannelServer,
} from "../../transport/index.ts";

export function tempDir(prefix: string): { path(name: string): string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { path: (name) => join(dir, name), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface Pair {
  client: Channel; // the connecting side; sends requests
  server: Channel; // the accepting side; serves
  listener: ChannelServer;
  close(): Promise<void>;
}

export async function channelPair(
  socketPath: string,
  options: ChannelOptions = {},
  clientOptions: ChannelOptions = options,
): Promise<Pair> {
  let accepted!: (ch: Channel) => void;
  const serverSide = new Promise<Channel>((resolve) => (accepted = resolve));
  const listener = await listenChannels(socketPath, (ch) => accepted(ch), options);
  const client = await connectChannel(socketPath, clientOptions);
  const server = await serverSide;
  return {
    client,
    server,
    listener,
    async close() {
      client.close();
      await listener.close();
    },
  };
}

export function totalBytes(parts: Buffer[]): number {
  let n = 0;
  for (const p of parts) n += p.length;
  return n;
}

/** A deferred value: the test resolves it when an event it waits for happens. */
export function deferred<T = void>(): { promise: Promise<T>; resolve(v: T): void; reject(e: unknown): void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** Resolves once `cond()` holds, checking after every turn of the event loop (no timers). */
export async function until(cond: () => boolean, what: string, maxTurns = 200_000): Promise<void> {
  for (let i = 0; i < maxTurns; i++) {
    if (cond()) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`gave up waiting for: ${what}`);
}
