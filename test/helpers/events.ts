// Waiting on supervision events in tests: resolve on the first event (past or future)
// matching a predicate. The timeout is a safety net that fails the test, never a sync.
import type { SupervisionEvent } from "../../actors/index.ts";

export interface EventSource {
  on(event: "event", listener: (event: SupervisionEvent) => void): unknown;
  off(event: "event", listener: (event: SupervisionEvent) => void): unknown;
}

export function waitForEvent(
  source: EventSource,
  seen: () => SupervisionEvent[],
  match: (event: SupervisionEvent) => boolean,
  timeoutMs = 30_000,
): Promise<SupervisionEvent> {
  const already = seen().find(match);
  if (already) return Promise.resolve(already);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      source.off("event", onEvent);
      reject(
        new Error(
          `no matching supervision event within ${timeoutMs} ms; seen: ${seen()
            .map((e) => `${e.actor}:${e.kind}`)
            .join(", ")}`,
        ),
      );
    }, timeoutMs);
    const onEvent = (event: SupervisionEvent) => {
      if (!match(event)) return;
      clearTimeout(timer);
      source.off("event", onEvent);
      resolve(event);
    };
    source.on("event", onEvent);
  });
}

/** True when a process with this pid exists (signal 0 probes without killing). */
export function alive(pid: number | null | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Poll until none of the pids is alive; resolves with the ones still alive at the deadline. */
export async function waitGone(pids: number[], timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = pids.filter(alive);
    if (left.length === 0 || Date.now() > deadline) return left;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A running tree whose worker processes a test may kill (SessionServer is one). */
export interface KillableTree extends EventSource {
  tree(): { shards: ReadonlyArray<{ pid?: number | null }> };
}

/** kill -9 of one worker; resolves once its supervisor has restarted it. */
export async function killAndAwaitRestart(server: KillableTree, shard: number): Promise<void> {
  const events: SupervisionEvent[] = [];
  const onEvent = (e: SupervisionEvent) => events.push(e);
  server.on("event", onEvent);
  try {
    process.kill(server.tree().shards[shard]!.pid!, "SIGKILL");
    await waitForEvent(
      server,
      () => events,
      (e) => e.actor === `shard-${shard}` && e.kind === "restarted",
    );
  } finally {
    server.off("event", onEvent);
  }
}
