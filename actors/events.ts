// The supervision event: plain data with a stable `kind` (docs/operations.md, "The event log"), and
// the bounded in-memory ring the event-log actor appends to. Kinds are never renamed.

export type EventKind =
  | "spawned"
  | "ready"
  | "exited"
  | "restarting"
  | "restarted"
  | "escalated"
  | "stopping"
  | "stopped"
  // The rollout door (the router's POST /admin/pause and /admin/resume; docs/rl-loop.md).
  | "paused"
  | "resumed";

export interface SupervisionEvent {
  seq: number;
  time: string;
  actor: string;
  kind: EventKind;
  pid: number | null;
  detail: Record<string, unknown>;
}

/** What an actor hands the event log; the log stamps `seq` and `time`. */
export type EventDraft = Omit<SupervisionEvent, "seq" | "time">;

export type EventListener = (event: SupervisionEvent) => void;

/** The last `capacity` events, in order; appended to only by the event-log actor. */
export class EventRing {
  readonly capacity: number;
  #items: SupervisionEvent[] = [];
  #start = 0;
  #seq = 0;

  constructor(capacity = 10_000) {
    this.capacity = capacity;
  }

  get lastSeq(): number {
    return this.#seq;
  }

  append(draft: EventDraft, now = new Date()): SupervisionEvent {
    this.#seq += 1;
    const event: SupervisionEvent = { seq: this.#seq, time: now.toISOString(), ...draft };
    if (this.#items.length < this.capacity) this.#items.push(event);
    else {
      this.#items[this.#start] = event;
      this.#start = (this.#start + 1) % this.capacity;
    }
    return event;
  }

  /** Events with `seq > since`, oldest first. */
  since(since = 0): SupervisionEvent[] {
    const ordered =
      this.#start === 0 ? this.#items : [...this.#items.slice(this.#start), ...this.#items.slice(0, this.#start)];
    if (since <= 0) return ordered.slice();
    const first = ordered.findIndex((e) => e.seq > since);
    return first < 0 ? [] : ordered.slice(first);
  }
}

/** One readable line per event for humans (the CLI's stderr). */
export function formatEvent(event: SupervisionEvent): string {
  const pid = event.pid === null ? "" : ` pid=${event.pid}`;
  const detail = Object.entries(event.detail)
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(" ");
  return `[supervision #${event.seq}] ${event.actor} ${event.kind}${pid}${detail ? " " + detail : ""}`;
}
