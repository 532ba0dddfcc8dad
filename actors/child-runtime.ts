// The child side of supervision, used by every entry point we fork (router, worker, and a
// worker's records streamer): read the config the host passed, report ready, and never
// outlive its parent — exit when the IPC channel closes (Node has no parent-death
// signal) and, as a backstop, when the parent pid changes. SIGTERM runs the child's own
// close hook, then exits 0.
import type { Socket } from "node:net";
import {
  HANDLE_ID,
  HANDLE_MARK,
  HANDLE_TAKEN,
  INIT_FAILED_EXIT,
  type ChildToHost,
  type InitFailure,
} from "./control-messages.ts";

/** `Report` is what the child sends its owner: ChildToHost for the host's children. */
export interface ChildRuntime<Config, Report = ChildToHost> {
  config: Config & { name: string; epoch: number };
  ready(info: Record<string, unknown>): void;
  /**
   * Reports a configuration error before ready and exits (INIT_FAILED_EXIT): the host then
   * fails the start with it instead of restarting this child (control-messages.ts).
   */
  initFailed(error: InitFailure): Promise<never>;
  /**
   * Reports to the host (a one-shot job's `ready` or `failed` for runChildJob, the router's
   * rollout state); resolves once the message is written to the IPC channel (it survives our
   * death then, so a job may exit).
   */
  report(message: Report): Promise<void>;
  /** Messages the host sends (HostToRouter for the router), and the handle one may carry. */
  onMessage(listener: (message: unknown, handle?: unknown) => void): void;
  /**
   * Hands a socket to the host with `message`, marked so that the supervision layer passes
   * both to the host's onHandle whatever they are (the router's records handoff). Our copy stays
   * open until `callback` (Node's keepOpen): on success the caller destroys it, since the
   * host has it now; on an error it is still the caller's to answer on.
   */
  sendSocket(message: object, socket: Socket, callback: (err: Error | null) => void): void;
  /** Runs once before the process exits on SIGTERM/SIGINT or host loss; keep it short. */
  onClose(hook: () => Promise<void> | void): void;
}

export function startChildRuntime<Config, Report = ChildToHost>(): ChildRuntime<Config, Report> {
  const raw = process.env.TITO_CHILD_CONFIG;
  if (!raw || !process.send) {
    process.stderr.write("this entry point is started by tito-server's supervisor (no TITO_CHILD_CONFIG / IPC)\n");
    process.exit(2);
  }
  const config = JSON.parse(raw) as Config & { name: string; epoch: number };
  const hooks: Array<() => Promise<void> | void> = [];
  let exiting = false;
  const exit = async (code: number) => {
    if (exiting) return;
    exiting = true;
    const force = setTimeout(() => process.exit(code), 2_000);
    force.unref();
    for (const hook of hooks) {
      try {
        await hook();
      } catch (err) {
        process.stderr.write(`${config.name}: close hook failed: ${(err as Error).message}\n`);
      }
    }
    process.exit(code);
  };
  process.on("disconnect", () => void exit(0));
  process.on("SIGTERM", () => void exit(0));
  process.on("SIGINT", () => void exit(0));
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) void exit(0);
  }, 1_000).unref();

  return {
    config,
    ready(info) {
      // With a callback, a parent gone meanwhile is no uncaught 'error': the disconnect exits us.
      process.send!({ type: "ready", info } satisfies ChildToHost, undefined, undefined, () => {});
    },
    async initFailed(error) {
      const { code, status, message } = error;
      await new Promise<void>((resolve) => {
        try {
          process.send!(
            { type: "init-failed", error: { code, status, message } } satisfies ChildToHost,
            undefined,
            undefined,
            () => resolve(),
          );
        } catch {
          resolve();
        }
      });
      process.exit(INIT_FAILED_EXIT);
    },
    report(message) {
      return new Promise((resolve) => {
        try {
          // The callback runs once the message is handed to the channel (or it failed: the host is gone).
          process.send!(message, undefined, undefined, () => resolve());
        } catch {
          resolve();
        }
      });
    },
    onMessage(listener) {
      process.on("message", (message: unknown, handle: unknown) => {
        const id = handle === undefined ? undefined : (message as Record<string, unknown> | null)?.[HANDLE_ID];
        if (typeof id !== "number") return listener(message, handle);
        // The sender keeps its copy until it reads this (sendSocketToChild): said before the
        // listener may write to the socket, and once on the channel, so it outlives our death.
        const taken = { type: HANDLE_TAKEN, [HANDLE_ID]: id };
        try {
          process.send!(taken, undefined, undefined, () => listener(message, handle));
        } catch {
          listener(message, handle); // the host is gone; so are we, soon
        }
      });
    },
    sendSocket(message, socket, callback) {
      try {
        process.send!({ ...message, [HANDLE_MARK]: true }, socket, { keepOpen: true }, callback);
      } catch (err) {
        process.nextTick(callback, err as Error);
      }
    },
    onClose(hook) {
      hooks.push(hook);
    },
  };
}
