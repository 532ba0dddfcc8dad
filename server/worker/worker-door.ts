// The rollout door as one worker sees it (docs/rl-loop.md, "Partial rollouts"): the router
// sends its state on every pause and resume (op door), and every chat turn it sends says
// the door was open then, under that weight version. A turn the engine aborted waits here
// before it continues (engine/resumed-turn.ts): at once while the door is open, or while a
// drain is under way (the pause waits for that very turn, so it continues under the old
// weights); while paused with in_flight keep or abort, until the resume, at most the hold
// timeout, after which the turn fails as the engine's abort did (503, nothing committed).
import type { CancelSignal } from "../../buffers/cancel.ts";
import { EngineAbortedError } from "../../sessions/index.ts";

export class WorkerDoor {
  #paused = false;
  #mode: string | null = null;
  #version: string | null = null;
  #waiters = new Set<() => void>();

  constructor(private readonly holdTimeoutMs: number) {}

  /** A chat turn came through the router: the door was open, under `version`. */
  sent(version: string | null | undefined): void {
    if (version === undefined) return;
    this.set(false, null, version);
  }

  set(paused: boolean, mode: string | null, version: string | null): void {
    this.#paused = paused;
    this.#mode = mode;
    this.#version = version;
    if (!this.#closed) for (const wake of [...this.#waiters]) wake();
  }

  get #closed(): boolean {
    return this.#paused && this.#mode !== "drain";
  }

  passage(signal?: CancelSignal): Promise<string | null> {
    if (!this.#closed) return Promise.resolve(this.#version);
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(wake);
        signal?.removeEventListener("abort", gone);
      };
      const wake = () => {
        done();
        resolve(this.#version);
      };
      const gone = () => {
        done();
        reject(signal?.reason ?? new Error("aborted"));
      };
      const timer = setTimeout(() => {
        done();
        reject(
          new EngineAbortedError(`held ${this.holdTimeoutMs} ms for the resume of a paused server (--hold-timeout-ms)`),
        );
      }, this.holdTimeoutMs);
      this.#waiters.add(wake);
      signal?.addEventListener("abort", gone, { once: true });
    });
  }
}
