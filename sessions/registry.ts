// The session registry of one shard: create (with an optional caller-supplied id; a
// duplicate is a loud 409, never a silent reuse), look up, and delete. Deleting takes
// the session's lock and sets its closing flag first, so a chat at the engine finishes
// without committing into a session that is gone. It remembers the ids of sessions that
// expired (idle-expiry.ts), the most recent ones, so a later request hears "expired"
// rather than "not found". Holds no tokens or records itself.
import { randomBytes } from "node:crypto";
import { InvalidSessionIdError, SessionExistsError, SessionExpiredError, SessionNotFoundError } from "./errors.ts";
import { Trajectory } from "./trajectory.ts";

// Ids travel in URL paths and log lines: keep them to a safe alphabet.
const ID_PATTERN = /^[A-Za-z0-9._~-]{1,128}$/;
/** Expired ids remembered per shard; an older one is then just "not found". */
export const MAX_EXPIRED_IDS = 100_000;

/** A caller-supplied id that cannot be a session id is a 400. */
export function checkSessionId(id: string): void {
  if (!ID_PATTERN.test(id) || id === "." || id === "..")
    throw new InvalidSessionIdError(
      `invalid session id ${JSON.stringify(id)}: use 1-128 characters of [A-Za-z0-9._~-]`,
    );
}

export class SessionRegistry {
  readonly #sessions = new Map<string, Trajectory>();
  /** Ids of expired sessions, oldest first. */
  readonly #expired = new Set<string>();
  /** Appended to every not-found message (e.g. after a shard restart lost sessions). */
  notFoundHint: string;

  constructor(notFoundHint = "") {
    this.notFoundHint = notFoundHint;
  }

  get size(): number {
    return this.#sessions.size;
  }

  create(sessionId?: string): Trajectory {
    return this.adopt(new Trajectory(sessionId ?? this.mintId()));
  }

  /** A new random id (32 lower-case hex characters). */
  mintId(): string {
    return randomBytes(16).toString("hex");
  }

  /** Registers a trajectory made elsewhere (a fork: Trajectory.forkAt) under its id, checked as create's. */
  adopt(trajectory: Trajectory): Trajectory {
    const id = trajectory.id;
    checkSessionId(id);
    if (this.#sessions.has(id)) throw new SessionExistsError(id);
    this.#expired.delete(id); // the id is taken again (PUT): a new session, not the expired one
    this.#sessions.set(id, trajectory);
    return trajectory;
  }

  /** The live session, or a 404 (`expired` for one idle expiry deleted); a session being deleted is already gone. */
  get(sessionId: string): Trajectory {
    const trajectory = this.#sessions.get(sessionId);
    if (!trajectory || trajectory.closing) {
      if (this.#expired.has(sessionId)) throw new SessionExpiredError(sessionId);
      throw new SessionNotFoundError(sessionId, this.notFoundHint);
    }
    return trajectory;
  }

  /** The session's routing key (upstream-keys.ts); its id when it is not here (the proxy route does not require it). */
  routingKey(sessionId: string): string {
    return this.#sessions.get(sessionId)?.routingKey ?? sessionId;
  }

  /**
   * Marks the session closing and removes it under its lock once `onRemoved` (dropping its
   * records; for a journal, writing the delete) has succeeded. If that fails the session
   * stays, open again, and the error goes to the caller. Holders queued before the delete run first.
   */
  async delete(
    sessionId: string,
    onRemoved?: (t: Trajectory) => void | Promise<void>,
    reason?: "expired",
  ): Promise<void> {
    const trajectory = this.get(sessionId);
    trajectory.closing = true;
    if (reason === "expired") this.#rememberExpired(sessionId);
    await trajectory.lock.run(async () => {
      try {
        await onRemoved?.(trajectory);
      } catch (err) {
        trajectory.closing = false;
        this.#expired.delete(sessionId);
        throw err;
      }
      this.#sessions.delete(sessionId);
    });
  }

  /** Forgets a session outright (journal replay of a delete): no lock, nobody holds it yet. */
  forget(sessionId: string, reason?: "expired"): void {
    this.#sessions.delete(sessionId);
    if (reason === "expired") this.#rememberExpired(sessionId);
  }

  #rememberExpired(sessionId: string): void {
    this.#expired.delete(sessionId);
    this.#expired.add(sessionId);
    if (this.#expired.size > MAX_EXPIRED_IDS) this.#expired.delete(this.#expired.values().next().value!);
  }

  ids(): IterableIterator<string> {
    return this.#sessions.keys();
  }
}
