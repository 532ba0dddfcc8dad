// How a session chooses its trajectory mode (docs/trajectories.md): the server's default
// (`--trajectory linear|tree`) unless its create body (`POST /sessions`, `PUT
// /sessions/{id}`) says `{"trajectory": "linear"|"tree"}`. The body's other keys are the
// budget's (budget.ts parses them and already refused a body that is not a JSON object).
import { InvalidTrajectoryModeError } from "../errors.ts";
import { TRAJECTORY_MODES, type TrajectoryMode } from "./tree.ts";
import type { TreeEvents } from "./tree-turn.ts";

export interface TreeOptions extends TreeEvents {
  /** The mode of a session whose create body does not name one (`--trajectory`); default linear. */
  mode?: TrajectoryMode;
  /** Nodes a tree-mode session may hold (`--max-trajectory-nodes`); default 1024. */
  maxNodes?: number;
}

/** The mode a create body asks for, else `fallback`; call after parseBudget accepted the body. */
export function trajectoryMode(body: Buffer | undefined, fallback: TrajectoryMode): TrajectoryMode {
  if (body === undefined || body.length === 0) return fallback;
  const value = (JSON.parse(body.toString("utf8")) as { trajectory?: unknown }).trajectory;
  if (value === undefined || value === null) return fallback;
  if (!TRAJECTORY_MODES.includes(value as TrajectoryMode)) throw new InvalidTrajectoryModeError(value);
  return value as TrajectoryMode;
}
