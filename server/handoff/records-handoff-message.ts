// The records handoff's IPC message (docs/architecture.md, "The records handoff"): the
// router sends it with a records GET's client socket, the host forwards it to the worker
// that kept the response (server/host/records-handoff.ts), which writes the response
// (server/worker/records-handoff.ts). The supervision layer passes it on by its handle mark
// (actors/control-messages.ts) without reading it; this module is what the three share.

/**
 * Router -> host -> worker, with the client's socket as the IPC handle. The worker of
 * `shard` kept a records response under `ticket` and writes it to that socket. The host
 * takes this message off the router's channel before anything reaches an actor's mailbox
 * (actors/child-actor.ts, by its handle mark) and forwards it at once, only to the process of that shard and `epoch`;
 * when there is none (the worker died or restarted meanwhile) it answers the client
 * the router's 503 (`refusal`) itself.
 */
export interface RecordsHandoff {
  type: "records-handoff";
  shard: number;
  epoch: number;
  ticket: string;
  /** The response headers the router itself adds (x-tito-instance, x-tito-shard). */
  headers: Record<string, string | string[]>;
  /** The router's error for an unavailable worker (its status, code and message), for the host's 503. */
  refusal: { status: number; code: string; message: string };
}

export function isRecordsHandoff(message: unknown): message is RecordsHandoff {
  const m = message as Partial<RecordsHandoff> | null;
  return (
    typeof m === "object" &&
    m !== null &&
    m.type === "records-handoff" &&
    Number.isInteger(m.shard) &&
    Number.isInteger(m.epoch) &&
    typeof m.ticket === "string" &&
    typeof m.headers === "object" &&
    m.headers !== null &&
    typeof m.refusal === "object" &&
    m.refusal !== null &&
    typeof m.refusal.status === "number" &&
    typeof m.refusal.code === "string" &&
    typeof m.refusal.message === "string"
  );
}
