// The event-log actor: the one place supervision events are stamped and published,
// so every reader (HTTP via the router, the embedding API, the JSONL file, the CLI's
// stderr) sees them in the same order. Listeners must not throw; one that does is
// logged to stderr and kept out of the actor's way.
import { appendFileSync } from "node:fs";
import { dispatch, spawn, type ActorSystemRef, type Ref } from "./nact.ts";
import { EventRing, type EventDraft, type EventListener } from "./events.ts";

/** `flush` answers once every event published before it has reached the listeners. */
export type EventLogMessage = { type: "publish"; draft: EventDraft } | { type: "flush" };

export interface EventLogHandle {
  ring: EventRing;
  listeners: Set<EventListener>;
}

export function spawnEventLog(system: ActorSystemRef, handle: EventLogHandle): Ref<EventLogMessage> {
  return spawn(
    system,
    (state: null, msg: EventLogMessage, ctx) => {
      if (msg.type === "flush") {
        dispatch(ctx.sender, { flushed: true });
        return state;
      }
      const event = handle.ring.append(msg.draft);
      for (const listener of handle.listeners) {
        try {
          listener(event);
        } catch (err) {
          process.stderr.write(`supervision event listener failed: ${(err as Error).stack}\n`);
        }
      }
      return state;
    },
    "event-log",
    { initialState: null, onCrash: (_m, _e, ctx) => ctx.resume },
  );
}

/** A listener that appends each event as one JSON line, written through as it happens. */
export function jsonlWriter(path: string): EventListener {
  return (event) => appendFileSync(path, JSON.stringify(event) + "\n");
}
