// Coded errors a worker answers the router with (over the transport, by code). Codes are
// stable and never reused; docs/errors.md lists each one (test/actors/errors.test.ts).

import { CodedError } from "../../buffers/coded-error.ts";

/** The worker glue's errors: one base, so a caller can tell the layer. */
export class WorkerError extends CodedError {}

/** A request frame that is not a shard request this worker knows (server/protocol/shard-protocol.ts). */
export class ShardRequestError extends WorkerError {
  constructor(problem: string) {
    super("TITO_ERR_SHARD_REQUEST", 500, `shard request not understood: ${problem}`);
  }
}

/** Seconds a client should wait before sending an aborted turn again (the router's Retry-After too). */
const RETRY_AFTER_S = 1;

/** A pause with in_flight "abort" (POST /admin/pause) stopped this chat turn before it committed; retryable. */
export class TurnAbortedError extends WorkerError {
  /** `finished`: stopped by POST /sessions/{id}/abort or /admin/abort (the session takes no more turns). */
  constructor(why: "pause" | "finished" = "pause") {
    super(
      "TITO_ERR_TURN_ABORTED",
      503,
      why === "pause"
        ? "turn aborted: the server paused for a weight update (in_flight abort) and nothing was committed; send the same request again after resume"
        : "turn aborted: the session was finished (POST /sessions/{id}/abort) and nothing was committed; it takes no more turns",
      { headers: { "retry-after": String(RETRY_AFTER_S) } },
    );
  }
}

/** A records streamer could not open the journal files of a records GET; the client gets this before any byte of the body. */
export class RecordsUnreadableError extends WorkerError {
  constructor(detail: string) {
    super("TITO_ERR_RECORDS_UNREADABLE", 500, `the session's records could not be read: ${detail}`);
  }
}
