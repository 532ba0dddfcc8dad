// The admin routes of the RL loop (docs/rl-loop.md; docs/http.md, "Admin"): POST
// /admin/pause closes the rollout door, POST /admin/resume sets the weight version and
// opens it, GET /admin/rollout tells where it stands. With --auth-token they take only the
// admin token: the auth hook lets a session token past nothing but chat and allowlisted
// proxy GETs. Their small JSON bodies are the router's own API, read here; a session's
// request and reply bodies never are.
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Channel } from "../../transport/index.ts";
import { requestShard, type DoorOp } from "../protocol/shard-protocol.ts";
import type { ShardLinks } from "./shard-links.ts";
import { InvalidAdminRequestError } from "./errors.ts";
import { joinedBody } from "./request-chunks.ts";
import { IN_FLIGHT_MODES, type InFlightMode, type RolloutDoor } from "./rollout-door.ts";

/** How long a pause with in_flight "abort" waits for one worker to take the abort. */
const ABORT_TIMEOUT_MS = 5_000;
const MAX_VERSION_CHARS = 256;

/** The body as a JSON object with only `allowed` keys ({} when empty); throws InvalidAdminRequestError. */
export function adminBody(raw: unknown, allowed: readonly string[]): Record<string, unknown> {
  const text = joinedBody(raw)?.toString("utf8").trim() ?? "";
  if (text === "") return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new InvalidAdminRequestError(`the body is not JSON: ${(err as Error).message}`);
  }
  if (!body || typeof body !== "object" || Array.isArray(body))
    throw new InvalidAdminRequestError("the body must be a JSON object");
  const unknown = Object.keys(body).filter((k) => !allowed.includes(k));
  if (unknown.length > 0)
    throw new InvalidAdminRequestError(`unknown key ${unknown.join(", ")} (allowed: ${allowed.join(", ")})`);
  return body as Record<string, unknown>;
}

/** Tells each worker to abort its chat turns in flight; a worker that is gone has failed them already. */
async function abortTurns(channels: Channel[]): Promise<void> {
  await Promise.allSettled(
    channels.map(async (channel) => {
      const res = await requestShard(channel, { op: "abort-turns" }, undefined, AbortSignal.timeout(ABORT_TIMEOUT_MS));
      await res.body.collect();
    }),
  );
}

/**
 * Tells every worker the door's state (op door), before a pause answers and after a resume:
 * an engine-aborted turn (--on-engine-abort resume) waits for the resume there. A worker
 * that is down has no turn in flight, and learns the version from its next chat turn.
 */
async function tellWorkers(links: ShardLinks | undefined, door: RolloutDoor): Promise<void> {
  if (!links) return;
  const rollout = door.rollout();
  const op: DoorOp = {
    op: "door",
    paused: rollout.state === "paused",
    mode: rollout.mode,
    weightVersion: rollout.weight_version,
  };
  await Promise.allSettled(
    Array.from({ length: links.size }, async (_, index) => {
      const signal = AbortSignal.timeout(ABORT_TIMEOUT_MS);
      const res = await requestShard(await links.acquire(index, signal), op, undefined, signal);
      await res.body.collect();
    }),
  );
}

export async function adminRoutes(
  app: FastifyInstance,
  { door, links }: { door: RolloutDoor; links?: ShardLinks },
): Promise<void> {
  app.post("/admin/pause", async (request: FastifyRequest, reply) => {
    const mode = adminBody(request.body, ["in_flight"]).in_flight ?? "drain";
    if (!IN_FLIGHT_MODES.includes(mode as InFlightMode))
      throw new InvalidAdminRequestError(
        `in_flight must be one of ${IN_FLIGHT_MODES.join(", ")}, got ${JSON.stringify(mode)}`,
      );
    const outcome = await door.pause(
      mode as InFlightMode,
      async (channels) => {
        await abortTurns(channels);
      },
      () => tellWorkers(links, door),
    );
    return reply.send({ ...outcome, ...door.status() });
  });

  app.post("/admin/resume", async (request: FastifyRequest, reply) => {
    const version = adminBody(request.body, ["weight_version"]).weight_version;
    if (typeof version !== "string" || version === "" || version.length > MAX_VERSION_CHARS)
      throw new InvalidAdminRequestError(
        `weight_version must be a non-empty string of at most ${MAX_VERSION_CHARS} characters, got ${JSON.stringify(version ?? null)}`,
      );
    const outcome = await door.resume(version);
    await tellWorkers(links, door);
    return reply.send({ ...outcome, ...door.status() });
  });

  app.get("/admin/rollout", async (_request, reply) => reply.send(door.status()));
}
