// The embedding API's side of the RL loop (docs/rl-loop.md): pause(), resume() and
// rollout() are the router's admin routes, called as the admin. The host keeps the rollout
// state between router processes (actors/supervisor.ts); these calls go to whichever
// router runs now, so they see and change the live door.
import type { InFlightMode, RolloutStatus } from "../router/rollout-door.ts";
import { RolloutRequestError } from "./errors.ts";
import { errorText, httpText } from "./http-text.ts";

export type { InFlightMode, RolloutStatus } from "../router/rollout-door.ts";

export interface PauseOptions {
  /** What happens to turns in flight: "drain" (default) waits for them, "abort" stops them, "keep" lets them run on. */
  inFlight?: InFlightMode;
}

/** POST /admin/pause's answer: the door now, and what the pause did. */
export interface PauseOutcome extends RolloutStatus {
  mode: InFlightMode;
  /** Turns in flight when the pause began, by mode: waited for, aborted, or left running. */
  drained?: number;
  aborted?: number;
  kept?: number;
  /** How long the pause took to answer (drain: until the in-flight turns finished). */
  wait_ms: number;
}

/** POST /admin/resume's answer. */
export interface ResumeOutcome extends RolloutStatus {
  previous_weight_version: string | null;
  /** Held turns let through, in arrival order. */
  released: number;
  /** How long the door was closed (0 when it was open). */
  paused_ms: number;
}

export class RolloutClient {
  constructor(
    readonly url: string,
    readonly headers: () => Record<string, string>,
  ) {}

  pause(opts: PauseOptions = {}): Promise<PauseOutcome> {
    return this.#call("POST", "/admin/pause", { in_flight: opts.inFlight ?? "drain" });
  }

  resume(weightVersion: string): Promise<ResumeOutcome> {
    return this.#call("POST", "/admin/resume", { weight_version: weightVersion });
  }

  rollout(): Promise<RolloutStatus> {
    return this.#call("GET", "/admin/rollout");
  }

  async #call<T>(method: string, route: string, body?: unknown): Promise<T> {
    const res = await httpText(`${this.url}${route}`, {
      method,
      headers: this.headers(),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.status !== 200) throw new RolloutRequestError(`${method} ${route}`, res.status, errorText(res.text));
    return JSON.parse(res.text) as T;
  }
}
