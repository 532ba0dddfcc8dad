// Coded errors of the supervision layer (docs/architecture.md, "Errors"). Codes are stable and never reused;
// docs/errors.md lists each one (checked by test/actors/errors.test.ts).

import { CodedError } from "../buffers/coded-error.ts";

/** The actors layer's errors: one base, so a caller can tell the layer. */
export class SupervisionError extends CodedError {}

/** The tree has failed (escalation, a failed start) or was shut down: check() throws it. */
export class SessionServerFailedError extends SupervisionError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("TITO_ERR_SERVER_FAILED", 503, message, options);
  }
}

/** A supervised child process exited when nobody asked it to: its actor crashes with this. */
export class ChildExitedError extends SupervisionError {
  readonly actor: string;
  readonly pid: number | null;
  readonly exitCode: number | null;
  readonly signal: string | null;
  constructor(actor: string, pid: number | null, exitCode: number | null, signal: string | null) {
    const how = signal ? `signal ${signal}` : `exit code ${exitCode}`;
    super("TITO_ERR_CHILD_EXITED", 503, `${actor} (pid ${pid}) exited unexpectedly with ${how}`);
    this.actor = actor;
    this.pid = pid;
    this.exitCode = exitCode;
    this.signal = signal;
  }
}

/** An actor did not answer a query in time (nact rejects with a bare Error('Query Timeout')). */
export class ActorQueryTimeoutError extends SupervisionError {
  constructor(what: string, timeoutMs: number, options?: { cause?: unknown }) {
    super("TITO_ERR_ACTOR_TIMEOUT", 500, `${what} did not answer within ${timeoutMs} ms`, options);
  }
}

/**
 * A child reported a configuration error before it was ever ready (control-messages.ts,
 * InitFailure): it is not restarted, and the start fails with this. It carries the child's
 * own code and status (e.g. TITO_ERR_CONFIG, 500) and its message, as a RemoteError carries
 * a peer's; TITO_ERR_CHILD_INIT only when the child gave none.
 */
export class ChildInitError extends SupervisionError {
  readonly actor: string;
  constructor(actor: string, failure: { code?: string; status?: number; message: string }) {
    super(failure.code ?? "TITO_ERR_CHILD_INIT", failure.status ?? 500, `${actor} could not start: ${failure.message}`);
    this.actor = actor;
  }
}
