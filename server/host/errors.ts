// Coded errors of the host: the embedding API, its options and the CLI.
// Codes are stable and never reused; docs/errors.md lists each one.

import { CodedError } from "../../buffers/coded-error.ts";

/** The server layer's errors: one base, so a caller can tell the layer. */
export class ServerError extends CodedError {}

/** A bad option to startSessionServer() or a bad CLI flag. */
export class InvalidOptionError extends ServerError {
  constructor(message: string) {
    super("TITO_ERR_INVALID_OPTION", 400, message);
  }
}

/** Another live server holds the journal directory's lock (server/data-dir-lock.ts). */
export class DataDirInUseError extends ServerError {
  readonly dir: string;
  readonly holderPid: number | undefined;
  constructor(dir: string, lockPath: string, holderPid: number | undefined) {
    const who = holderPid === undefined ? "another tito-server" : `another tito-server (pid ${holderPid})`;
    super(
      "TITO_ERR_DATA_DIR_IN_USE",
      409,
      `data directory ${dir} is in use by ${who}: one server per --data-dir. If no such server runs (the pid was reused), remove ${lockPath}`,
    );
    this.dir = dir;
    this.holderPid = holderPid;
  }
}

/** server.samples() got a non-200: `status` is the HTTP status (404 unknown or lost session, 400 bad request, …). */
export class SamplesRequestError extends ServerError {
  readonly sessionId: string;
  constructor(sessionId: string, status: number, message: string) {
    super("TITO_ERR_SAMPLES_REQUEST", status, `samples of session ${sessionId} failed (${status}): ${message}`);
    this.sessionId = sessionId;
  }
}

/** server.createSession() got a non-200 from `POST /sessions`. */
export class CreateSessionError extends ServerError {
  constructor(status: number, message: string) {
    super("TITO_ERR_CREATE_SESSION", status, `creating a session failed (${status}): ${message}`);
  }
}

/** server.pause(), resume() or rollout() got a non-200 from the router's admin route. */
export class RolloutRequestError extends ServerError {
  constructor(route: string, status: number, message: string) {
    super("TITO_ERR_ROLLOUT_REQUEST", status, `${route} failed (${status}): ${message}`);
  }
}

/**
 * A --data-dir's journal cannot be made right for this worker count: its layout record
 * (tito-journal.json) is unreadable, or re-sharding it failed (the old shards are untouched).
 */
export class DataDirLayoutError extends ServerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("TITO_ERR_DATA_DIR_LAYOUT", 500, message, options);
  }
}

/** server.fork() got a non-201 from POST /sessions/{id}/fork: `status` is the HTTP status (404, 409, 400, …). */
export class ForkSessionError extends ServerError {
  readonly sessionId: string;
  constructor(sessionId: string, status: number, message: string) {
    super("TITO_ERR_FORK_SESSION", status, `forking session ${sessionId} failed (${status}): ${message}`);
    this.sessionId = sessionId;
  }
}
