// GET /sessions?limit=&after=: this instance's session ids in id order, one page at a time,
// for a trainer that enumerates what to pull. Every shard answers its own first `limit`
// ids after the cursor; the router merges them and keeps the first `limit`. `next` is the
// cursor of the following page (the last id given), null when nothing follows. A shard
// that cannot answer makes the page a 503: a partial listing would silently hide sessions.
import type { FastifyReply, FastifyRequest } from "fastify";
import { requestShard, type ListPage } from "../shard-protocol.ts";
import { InvalidListRequestError, WorkerUnavailableError } from "./errors.ts";
import type { ShardLinks } from "./shard-links.ts";

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;
const LIST_TIMEOUT_MS = 10_000;
const INCOMPLETE = "session worker unavailable: the listing would be incomplete";

type ListRequest = FastifyRequest<{ Querystring: { limit?: string; after?: string } }>;

export function listSessions(links: ShardLinks) {
  return async (request: ListRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const { limit: rawLimit, after = "" } = request.query;
    const limit = rawLimit === undefined ? DEFAULT_LIMIT : Number(rawLimit);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)
      throw new InvalidListRequestError(
        `limit must be an integer from 1 to ${MAX_LIMIT}, got ${JSON.stringify(rawLimit)}`,
      );
    if (typeof after !== "string") throw new InvalidListRequestError("after must be one session id");
    const signal = AbortSignal.timeout(LIST_TIMEOUT_MS);
    const page = async (shard: number): Promise<ListPage> => {
      try {
        const channel = await links.acquire(shard, signal);
        const res = await requestShard(channel, { op: "list", after, limit }, undefined, signal);
        const text = Buffer.concat(await res.body.collect()).toString("utf8");
        if (res.status !== 200) throw new Error(`answered ${res.status}: ${text}`);
        return JSON.parse(text) as ListPage;
      } catch (err) {
        request.log.warn({ shard, err: String(err) }, "a shard could not list its sessions");
        throw new WorkerUnavailableError(shard, String(err), { cause: err, message: INCOMPLETE });
      }
    };
    const pages = await Promise.all(Array.from({ length: links.size }, (_, shard) => page(shard)));
    const all = pages.flatMap((p) => p.sessions).sort();
    const sessions = all.slice(0, limit);
    const more = all.length > limit || pages.some((p) => p.more);
    return reply.send({ sessions, next: more && sessions.length > 0 ? sessions[sessions.length - 1] : null });
  };
}
