// The router's copy of the supervision state the host keeps: the tree and the event log,
// pushed over IPC (router-main.ts), served by /health and /supervision (router-status.ts)
// and read by the metrics (router-metrics.ts). Data only, so both can import it.
import type { SupervisionEvent, TreeSnapshot } from "../../actors/index.ts";

export interface RouterStatus {
  instanceId: string;
  tree: TreeSnapshot | null;
  events: SupervisionEvent[];
}

/** The events the router keeps, the newest (docs/http.md, "GET /supervision/events"). */
const MAX_EVENTS = 10_000;

export function addEvents(status: RouterStatus, events: SupervisionEvent[]): void {
  const last = status.events.at(-1)?.seq ?? 0;
  for (const event of events) if (event.seq > last) status.events.push(event);
  if (status.events.length > MAX_EVENTS) status.events.splice(0, status.events.length - MAX_EVENTS);
}
