// GET /sessions?limit=&after=: this instance's session ids in id order, one page at a time,
// for a trainer that enumerates what to pull. Every shard answers its own first `limit`
// ids after the cursor; the router merges them and keeps the first `limit`. `next` is the
// cursor of the following page (the last id given), null when nothing follows. A shard
// that cannot answer makes the page a 503: a partial listing would silently hide sessions.
// `detail=1` (the viewer's list, docs/viewer.md) makes each session a summary object the
// worker computes (sessions/session-summary.ts), the router only sorts them by id; `prefix`
// keeps the ids that start with it.
import type { FastifyReply, FastifyRequest } from "fastify";
import { requestShard, type ListedSession, type ListPage } from "../protocol/shard-protocol.ts";
import { InvalidListRequestError, WorkerUnavailableError } from "./errors.ts";
import type { ShardLinks } from "./shard-links.ts";

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;
const LIST_TIMEOUT_MS = 10_000;
const INCOMPLETE = "session worker unavailable: the listing would be incomplete";

type ListRequest = FastifyRequest<{
  Querystring: { limit?: string; after?: string; detail?: string; prefix?: string };
}>;

const idOf = (s: string | ListedSession) => (typeof s === "string" ? s : s.session_id);

export function listSessions(links: ShardLinks) {
  return async (request: ListRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const { limit: rawLimit, after = "" } = request.query;
    const limit = rawLimit === undefined ? DEFAULT_LIMIT : Number(rawLimit);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)
      throw new InvalidListRequestError(
        `limit must be an integer from 1 to ${MAX_LIMIT}, got ${JSON.stringify(rawLimit)}`,
      );
    if (typeof after !== "string") throw new InvalidListRequestError("after must be one session id");
    const { detail: rawDetail = "0" } = request.query;
    if (rawDetail !== "0" && rawDetail !== "1")
      throw new InvalidListRequestError(`detail must be 0 or 1, got ${JSON.stringify(rawDetail)}`);
    const detail = rawDetail === "1";
    const { prefix = "" } = request.query;
    if (typeof prefix !== "string") throw new InvalidListRequestError("prefix must be one string");
    const signal = AbortSignal.timeout(LIST_TIMEOUT_MS);
    const page = async (shard: number): Promise<ListPage> => {
      try {
        const channel = await links.acquire(shard, signal);
        const res = await requestShard(channel, { op: "list", after, limit, detail, prefix }, undefined, signal);
        const text = Buffer.concat(await res.body.collect()).toString("utf8");
        if (res.status !== 200) throw new Error(`answered ${res.status}: ${text}`);
        return JSON.parse(text) as ListPage;
      } catch (err) {
        request.log.warn({ shard, err: String(err) }, "a shard could not list its sessions");
        throw new WorkerUnavailableError(shard, String(err), { cause: err, message: INCOMPLETE });
      }
    };
    const pages = await Promise.all(Array.from({ length: links.size }, (_, shard) => page(shard)));
    const all = pages.flatMap((p): (string | ListedSession)[] => p.sessions);
    all.sort((a, b) => (idOf(a) < idOf(b) ? -1 : idOf(a) > idOf(b) ? 1 : 0));
    const sessions = all.slice(0, limit);
    const more = all.length > limit || pages.some((p) => p.more);
    return reply.send({ sessions, next: more && sessions.length > 0 ? idOf(sessions[sessions.length - 1]!) : null });
  };
}
