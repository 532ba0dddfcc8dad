// Coded errors the router writes to HTTP clients. Codes are stable and never reused;
// docs/errors.md lists each one (test/actors/errors.test.ts). Each class fixes its status
// (and headers, such as a retryable 503's Retry-After): the router's one error handler
// (error-reply.ts) writes whatever a route throws as `{"error": message, "code": code}`.

import { CodedError } from "../../buffers/coded-error.ts";

/** The router's errors: one base, so a caller can tell the layer. */
export class RouterError extends CodedError {}

/** Seconds a client should wait before it sends a retryable request again (docs/http.md). */
export const RETRY_AFTER_S = 1;
const RETRY = { "retry-after": String(RETRY_AFTER_S) };

/** The shard that owns a session has no live worker (down, restarting past the wait bound). */
export class WorkerUnavailableError extends RouterError {
  /** Why, for logs; the HTTP body is exactly docs/http.md's "session worker unavailable". */
  readonly detail: string;
  constructor(shard: number, why: string, options?: { cause?: unknown; message?: string }) {
    super("TITO_ERR_WORKER_UNAVAILABLE", 503, options?.message ?? "session worker unavailable", options);
    this.detail = `shard ${shard}: ${why}`;
  }
}

/**
 * The router could not listen on --host/--port (in use, not permitted, no such address):
 * a configuration error reported before it was ever ready, so it is not restarted (OTP's
 * init rule, actors/control-messages.ts) and the start fails with it; no HTTP client sees it.
 */
export class RouterListenError extends RouterError {
  constructor(address: string, err: Error) {
    super("TITO_ERR_LISTEN", 500, `cannot listen on ${address}: ${err.message}`, { cause: err });
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
      { headers: RETRY },
    );
  }
}

/** An admin request (POST /admin/pause, /admin/resume) with a body the router cannot use. */
export class InvalidAdminRequestError extends RouterError {
  constructor(message: string) {
    super("TITO_ERR_INVALID_ADMIN_REQUEST", 400, `invalid admin request: ${message}`);
  }
}

/** No route matches the request's method and path. */
export class RouteNotFoundError extends RouterError {
  constructor(method: string, url: string) {
    super("TITO_ERR_ROUTE_NOT_FOUND", 404, `route not found: ${method} ${url}`);
  }
}

/** GET /ui/{file} for a file the viewer does not ship (or a package built without dist/ui). */
export class ViewerFileNotFoundError extends RouterError {
  constructor(path: string) {
    super(
      "TITO_ERR_VIEWER_FILE_NOT_FOUND",
      404,
      `viewer file not found: ${path} (is the package built? npm run build)`,
    );
  }
}

/** The request body is larger than --body-limit. */
export class BodyTooLargeError extends RouterError {
  constructor(limit: number) {
    super("TITO_ERR_BODY_TOO_LARGE", 413, `request body too large: the limit is ${limit} bytes`);
  }
}

/** A request Fastify refused before any route ran (a malformed URL or header, a bad query value); its status and message. */
export class BadRequestError extends RouterError {
  constructor(status: number, message: string, options?: { cause?: unknown }) {
    super("TITO_ERR_BAD_REQUEST", status, message, options);
  }
}

/** A path parameter longer than the router takes (256 characters) on a route other than PUT /sessions/{id}. */
export class UriTooLongError extends RouterError {
  constructor(message: string) {
    super("TITO_ERR_URI_TOO_LONG", 414, message);
  }
}

/**
 * A PUT /sessions/{id} whose id is too long for the router's path parameter. The worker
 * refuses a bad id with the same code (sessions/errors.ts, InvalidSessionIdError): to a
 * client both are the same mistake, whichever process saw it first.
 */
export class SessionIdTooLongError extends RouterError {
  constructor() {
    super("TITO_ERR_INVALID_SESSION_ID", 400, "invalid session id: use 1-128 characters of [A-Za-z0-9._~-]");
  }
}

/** GET /sessions with a `limit` or `after` the listing cannot use. */
export class InvalidListRequestError extends RouterError {
  constructor(message: string) {
    super("TITO_ERR_INVALID_LIST_REQUEST", 400, message);
  }
}

/** GET /health: the tree is not running, or a worker did not pass its health check. */
export class UnhealthyError extends RouterError {
  constructor() {
    super("TITO_ERR_UNHEALTHY", 503, "one or more session workers unhealthy");
  }
}

/** GET /supervision before the host has sent the router its tree. */
export class TreeUnknownError extends RouterError {
  constructor() {
    super("TITO_ERR_TREE_UNKNOWN", 503, "supervision tree not known yet");
  }
}

/** An error the router did not expect (a bug): its message, as a 500. */
export class RouterInternalError extends RouterError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("TITO_ERR_ROUTER_INTERNAL", 500, `internal router error: ${message}`, options);
  }
}

/** A chat turn beyond --max-inflight-turns with --max-queued-turns already waiting: retry after `retryAfterS`. */
export class OverloadedError extends RouterError {
  readonly retryAfterS: number;
  constructor(inflight: number, queued: number, retryAfterS: number) {
    super(
      "TITO_ERR_OVERLOADED",
      429,
      `server overloaded: ${inflight} turns in flight (--max-inflight-turns) and ${queued} waiting (--max-queued-turns); retry after ${retryAfterS} s`,
      { headers: { "retry-after": String(retryAfterS) } },
    );
    this.retryAfterS = retryAfterS;
  }
}
