// The supervision layer's public surface: the actor tree the host runs (nact), its
// events and errors, and the control messages its children speak. Never imports sessions/.
export { SupervisionTree, type SupervisionTreeOptions } from "./supervision-tree.ts";
export { isAlive, runChildJob, sendSocketToChild, spawnChild, stopChild, type ChildSpec } from "./child-process.ts";
export { HANDLE_MARK, isHandleMessage } from "./control-messages.ts";
export type {
  ChildToHost,
  HostToRouter,
  InitFailure,
  RolloutEvent,
  RolloutState,
  ShardRoute,
  TreeSnapshot,
} from "./control-messages.ts";
export { EventRing, formatEvent, type EventKind, type EventListener, type SupervisionEvent } from "./events.ts";
export { defaultRestartPolicy, RestartPolicy, type RestartPolicyOptions } from "./restart-policy.ts";
export {
  ActorQueryTimeoutError,
  ChildExitedError,
  ChildInitError,
  SessionServerFailedError,
  SupervisionError,
} from "./errors.ts";
export { startChildRuntime, type ChildRuntime } from "./child-runtime.ts";
