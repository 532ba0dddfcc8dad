// The package root: the embedding API for rollout programs.
export { startSessionServer, type CreatedSession, type SessionServer } from "./server/host/session-server.ts";
export type {
  InFlightMode,
  PauseOptions,
  PauseOutcome,
  ResumeOutcome,
  RolloutStatus,
} from "./server/host/rollout-client.ts";
export type { SessionServerOptions } from "./server/host/options.ts";
export {
  CreateSessionError,
  DataDirInUseError,
  DataDirLayoutError,
  ForkSessionError,
  InvalidOptionError,
  RolloutRequestError,
  SamplesRequestError,
} from "./server/host/errors.ts";
export type { TrainingSample } from "./sessions/index.ts";
export {
  ChildInitError,
  SessionServerFailedError,
  type SupervisionEvent,
  type EventKind,
  type TreeSnapshot,
} from "./actors/index.ts";
