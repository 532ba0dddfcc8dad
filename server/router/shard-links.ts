// The router's connections to the workers: one transport channel per shard, built from
// what the host says (ShardRoute), never from a guessed socket path. A request for a
// shard that is starting or restarting waits up to `waitMs` for the new worker, then
// fails with WorkerUnavailableError; a closed channel makes the shard unavailable at
// once, and its in-flight requests fail through the channel itself.
import { connectChannel, type Channel } from "../../transport/index.ts";
import type { ShardRoute } from "../../actors/control-messages.ts";
import { WorkerUnavailableError } from "./errors.ts";
import type { CancelSignal } from "../../buffers/cancel.ts";

interface Link {
  route: ShardRoute;
  channel?: Channel;
  connecting?: Promise<Channel | undefined>;
  waiters: Set<() => void>;
}

export class ShardLinks {
  readonly #links: Link[];
  readonly #waitMs: number;
  /** The worker incarnation each channel reaches (the host checks it on a records handoff). */
  readonly #epochs = new WeakMap<Channel, number>();
  #closed = false;

  constructor(workers: number, waitMs: number) {
    this.#waitMs = waitMs;
    this.#links = Array.from({ length: workers }, (_, index) => ({
      route: { index, state: "starting", epoch: 0, socketPath: null },
      waiters: new Set(),
    }));
  }

  get size(): number {
    return this.#links.length;
  }

  /** Apply the host's view of the shards. */
  update(routes: ShardRoute[]): void {
    for (const route of routes) {
      const link = this.#links[route.index];
      if (!link) continue;
      const moved = route.socketPath !== link.route.socketPath || route.epoch !== link.route.epoch;
      link.route = route;
      if (moved || route.state !== "running") this.#drop(link);
      if (route.state === "running" && route.socketPath && !link.channel && !link.connecting) void this.#connect(link);
    }
  }

  /** The channel of a running shard, waiting a bounded time while it (re)starts. */
  async acquire(index: number, signal?: CancelSignal): Promise<Channel> {
    const link = this.#links[index];
    const deadline = Date.now() + this.#waitMs;
    for (;;) {
      if (this.#closed) throw new WorkerUnavailableError(index, "router is closing");
      if (link.channel && !link.channel.closed) return link.channel;
      if (link.connecting) {
        const channel = await link.connecting;
        if (channel && !channel.closed) return channel;
      }
      const left = deadline - Date.now();
      if (left <= 0 || link.route.state === "stopped" || signal?.aborted) {
        throw new WorkerUnavailableError(index, `shard ${index} is ${link.route.state}`);
      }
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          link.waiters.delete(done);
          signal?.removeEventListener("abort", done);
          resolve();
        };
        const timer = setTimeout(done, left);
        link.waiters.add(done);
        signal?.addEventListener("abort", done, { once: true });
      });
    }
  }

  /** The epoch of the worker process at the other end of `channel` (one this class made). */
  epochOf(channel: Channel): number {
    return this.#epochs.get(channel) ?? 0;
  }

  close(): void {
    this.#closed = true;
    for (const link of this.#links) {
      this.#drop(link);
      this.#wake(link);
    }
  }

  async #connect(link: Link): Promise<Channel | undefined> {
    const { socketPath, epoch } = link.route;
    const attempt = (async () => {
      try {
        const channel = await connectChannel(socketPath!);
        if (link.route.epoch !== epoch || this.#closed) {
          channel.close();
          return undefined;
        }
        channel.onClose(() => {
          if (link.channel === channel) link.channel = undefined;
        });
        link.channel = channel;
        this.#epochs.set(channel, epoch);
        return channel;
      } catch (err) {
        process.stderr.write(
          `router: cannot connect to shard ${link.route.index} at ${socketPath}: ${(err as Error).message}\n`,
        );
        return undefined;
      } finally {
        link.connecting = undefined;
        this.#wake(link);
      }
    })();
    link.connecting = attempt;
    return attempt;
  }

  #drop(link: Link): void {
    link.channel?.close();
    link.channel = undefined;
  }

  #wake(link: Link): void {
    for (const waiter of [...link.waiters]) waiter();
  }
}
