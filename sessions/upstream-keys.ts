// What every engine request of a session's turn carries besides the turn itself: the cache
// salt (--cache-salt; docs/rl-loop.md, "Cache salt") and the routing key (--engine-session-headers;
// docs/engines.md, "Several engine replicas"). The adapters (engine/) put them where each engine
// API reads them; the core only decides their values, from the trajectory and the turn's version.
import type { Trajectory } from "./trajectory.ts";

/** `--cache-salt`: no salt, the version the turn is sent under, or the version its session started under. */
export type CacheSaltMode = "off" | "turn" | "session";
export const CACHE_SALT_MODES: readonly CacheSaltMode[] = ["off", "turn", "session"];

/** The salt of one turn; undefined (nothing sent, today's request bytes) while no weight version is known. */
export function cacheSaltOf(
  mode: CacheSaltMode,
  t: Pick<Trajectory, "firstWeightVersion">,
  weightVersion: string | null | undefined,
): string | undefined {
  if (mode === "off") return undefined;
  const turn = weightVersion ?? undefined;
  // `session`: the version of the session's first committed turn (kept in its record, so a
  // worker that replays the journal sends the same); a first turn, or one after a rollback to
  // the start, starts the session anew under its own version.
  return (mode === "session" ? (t.firstWeightVersion ?? turn) : turn) || undefined;
}

/** The turn's upstream keys, as EngineTurnRequest takes them. */
export function upstreamKeys(mode: CacheSaltMode, t: Trajectory, weightVersion: string | null | undefined) {
  return {
    cacheSalt: cacheSaltOf(mode, t, weightVersion),
    cacheSaltFollowsVersion: mode === "turn",
    routingKey: t.routingKey,
  };
}
