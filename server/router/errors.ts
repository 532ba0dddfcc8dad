// Coded errors the router writes to HTTP clients. Codes are stable and never reused;
// docs/errors.md lists each one (test/actors/errors.test.ts).

import { CodedError } from "../../buffers/coded-error.ts";

/** The router's errors: one base, so a caller can tell the layer. */
export class RouterError extends CodedError {}

/** The shard that owns a session has no live worker (down, restarting past the wait bound). */
export class WorkerUnavailableError extends RouterError {
  /** Why, for logs; the HTTP body is exactly docs/http.md's "session worker unavailable". */
  readonly detail: string;
  constructor(shard: number, why: string, options?: { cause?: unknown }) {
    super("TITO_ERR_WORKER_UNAVAILABLE", 503, "session worker unavailable", options);
    this.detail = `shard ${shard}: ${why}`;
  }
}

/** The worker failed the request (a bug or a transport failure other than its death). */
export class WorkerFailedError extends RouterError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("TITO_ERR_WORKER_FAILED", 502, `session worker error: ${message}`, options);
  }
}

/** Authorization header missing or wrong while --auth-token is on. */
export class UnauthorizedError extends RouterError {
  constructor() {
    super("TITO_ERR_UNAUTHORIZED", 401, "missing or invalid bearer token");
  }
}

/** A session token used for something only the admin token may do (docs/security.md). */
export class ForbiddenError extends RouterError {
  constructor(message: string) {
    super("TITO_ERR_FORBIDDEN", 403, message);
  }
}

/** A chat turn waited at the rollout door (the server paused) longer than --hold-timeout-ms; retryable. */
export class HoldTimeoutError extends RouterError {
  constructor(holdTimeoutMs: number) {
    super(
      "TITO_ERR_HOLD_TIMEOUT",
      503,
      `turn held at the door for ${holdTimeoutMs} ms while the server is paused for a weight update (--hold-timeout-ms); retry it after resume`,
    );
  }
}

/** An admin request (POST /admin/pause, /admin/resume) with a body the router cannot use. */
export class InvalidAdminRequestError extends RouterError {
  constructor(message: string) {
    super("TITO_ERR_INVALID_ADMIN_REQUEST", 400, `invalid admin request: ${message}`);
  }
}
