// Shared bits of the RL-loop tests (docs/rl-loop.md): the admin routes as plain HTTP calls,
// a bounded wait for the rollout door to reach a state, and a promise's settled flag.
import type { RolloutStatus } from "../../server/router/rollout-door.ts";
import { call, type JsonResponse } from "./server.ts";

export function admin<Body = Record<string, unknown>>(
  url: string,
  method: "GET" | "POST",
  route: "/admin/pause" | "/admin/resume" | "/admin/rollout",
  body?: unknown,
  headers?: Record<string, string>,
): Promise<JsonResponse<Body>> {
  return call<Body>(url, method, route, body, headers);
}

/** Polls GET /admin/rollout until `ready` holds (a bounded loop: fails the test after `timeoutMs`). */
export async function rolloutUntil(
  url: string,
  ready: (status: RolloutStatus) => boolean,
  timeoutMs = 20_000,
): Promise<RolloutStatus> {
  const deadline = Date.now() + timeoutMs;
  let last: RolloutStatus | undefined;
  while (Date.now() < deadline) {
    last = (await admin<RolloutStatus>(url, "GET", "/admin/rollout")).json;
    if (last && ready(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`the rollout door never got there; last seen ${JSON.stringify(last)}`);
}

/** A promise and whether it has settled yet (to show something did NOT happen before an event). */
export function tracked<T>(promise: Promise<T>): { promise: Promise<T>; settled: () => boolean } {
  let settled = false;
  const p = promise.finally(() => (settled = true));
  return { promise: p, settled: () => settled };
}
