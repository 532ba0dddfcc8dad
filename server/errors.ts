// Coded errors of the server layer (router, worker glue, embedding API, CLI).
// Codes are stable and never reused; docs/errors.md lists each one.

export class ServerError extends Error {
  readonly code: string;
  readonly status: number;
  constructor(code: string, status: number, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }
}

/** The shard that owns a session has no live worker (down, restarting past the wait bound). */
export class WorkerUnavailableError extends ServerError {
  /** Why, for logs; the HTTP body is exactly CONTRACT.md's "session worker unavailable". */
  readonly detail: string;
  constructor(shard: number, why: string, options?: { cause?: unknown }) {
    super("TITO_ERR_WORKER_UNAVAILABLE", 503, "session worker unavailable", options);
    this.detail = `shard ${shard}: ${why}`;
  }
}

/** The worker failed the request (a bug or a transport failure other than its death). */
export class WorkerFailedError extends ServerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("TITO_ERR_WORKER_FAILED", 502, `session worker error: ${message}`, options);
  }
}

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

/** Authorization header missing or wrong while --auth-token is on. */
export class UnauthorizedError extends ServerError {
  constructor() {
    super("TITO_ERR_UNAUTHORIZED", 401, "missing or invalid bearer token");
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
