// The rollout door's Prometheus series (docs/http.md, "GET /metrics"): whether the door is
// closed, the turns held and in flight now, how long held turns waited and how they left,
// how long pauses lasted and took to answer, and the turns answered per weight version.
// The version label keeps only the most recent versions, so a long run's series stay few.
import { Counter, Gauge, Histogram, type MetricSet } from "../protocol/metric-series.ts";
import type { DoorObserver, InFlightMode, RolloutDoor } from "./rollout-door.ts";

/** Weight versions kept as label values of tito_turns_by_weight_version_total; older ones are dropped. */
export const MAX_VERSION_LABELS = 64;
const SECONDS = [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];

export class RolloutMetrics implements DoorObserver {
  readonly #hold: Histogram;
  readonly #pause: Histogram;
  readonly #pauseWait: Histogram;
  readonly #turns: Counter;
  /** Version label values in the order they were first seen, with the statuses used with each. */
  readonly #versions = new Map<string, Set<string>>();

  constructor(set: MetricSet, door: () => RolloutDoor | undefined) {
    new Gauge(set, {
      name: "tito_rollout_paused",
      help: "1 while the rollout door is closed (POST /admin/pause until /admin/resume).",
      collect: (g) => g.set(door()?.status().state === "paused" ? 1 : 0),
    });
    new Gauge(set, {
      name: "tito_rollout_held_turns",
      help: "Chat turns waiting at the rollout door now.",
      collect: (g) => g.set(door()?.status().held ?? 0),
    });
    new Gauge(set, {
      name: "tito_rollout_inflight_turns",
      help: "Chat turns that passed the rollout door and have no answer from their worker yet.",
      collect: (g) => g.set(door()?.status().in_flight ?? 0),
    });
    this.#hold = new Histogram(set, {
      name: "tito_rollout_hold_seconds",
      help: "Time a chat turn waited at the rollout door, by how it left: released (resume), timeout (--hold-timeout-ms), gone (client left).",
      labelNames: ["outcome"],
      buckets: SECONDS,
    });
    this.#pause = new Histogram(set, {
      name: "tito_rollout_pause_seconds",
      help: "How long the rollout door stayed closed, pause to resume.",
      buckets: SECONDS,
    });
    this.#pauseWait = new Histogram(set, {
      name: "tito_rollout_pause_answer_seconds",
      help: "Time POST /admin/pause took to answer, by in_flight mode (drain: until the in-flight turns finished).",
      labelNames: ["mode"],
      buckets: SECONDS,
    });
    this.#turns = new Counter(set, {
      name: "tito_turns_by_weight_version_total",
      help: `Chat turns answered by their worker, by the weight version they were sent under ("none" before the first resume) and status (200: committed); the last ${MAX_VERSION_LABELS} versions.`,
      labelNames: ["weight_version", "status"],
    });
  }

  held(outcome: "released" | "timeout" | "gone", seconds: number): void {
    this.#hold.observe({ outcome }, seconds);
  }

  paused(seconds: number): void {
    this.#pause.observe(seconds);
  }

  pauseAnswered(mode: InFlightMode, seconds: number): void {
    this.#pauseWait.observe({ mode }, seconds);
  }

  turnAnswered(weightVersion: string | null, status: number): void {
    const version = weightVersion ?? "none";
    let statuses = this.#versions.get(version);
    if (!statuses) {
      this.#versions.set(version, (statuses = new Set()));
      if (this.#versions.size > MAX_VERSION_LABELS) {
        const [oldest, used] = this.#versions.entries().next().value!;
        this.#versions.delete(oldest);
        for (const s of used) this.#turns.remove({ weight_version: oldest, status: s });
      }
    }
    statuses.add(String(status));
    this.#turns.inc({ weight_version: version, status: String(status) });
  }
}
