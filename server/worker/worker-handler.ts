// Joins the session core to the transport: one request frame from the router becomes one
// core operation, and the core's {status, headers, body} goes back as the reply. The ops
// and their metadata are server/protocol/shard-protocol.ts; a frame that is not one of them is
// answered with a coded error (ShardRequestError), never a crash. The worker trusts the
// router's routing; it knows nothing of HTTP servers. It keeps its chat turns in flight,
// so a pause with in_flight "abort" (op abort-turns) can stop them before they commit. A
// get with a handoff ticket keeps a 200 response for the client's socket (records-handoff.ts);
// a records body the router relays goes back whole when it is small (wholeRecords).
import type { Handler, IncomingBody, Reply } from "../../transport/index.ts";
import { asAnthropicError, errorResponse, messagesTurn, RecordStream } from "../../sessions/index.ts";
import { release } from "../../buffers/release.ts";
import type { CoreRequest, CoreResponse, MessagesTurnOptions, SessionCore } from "../../sessions/index.ts";
import {
  readShardRequest,
  shardOf,
  type ListPage,
  type ShardReply,
  type ShardRequest,
} from "../protocol/shard-protocol.ts";
import { ShardRequestError, TurnAbortedError } from "./errors.ts";
import type { WorkerMetrics } from "./worker-metrics.ts";
import type { ParkedResponses } from "./records-handoff.ts";
import type { WorkerDoor } from "./worker-door.ts";
import { Cancel, type CancelSignal } from "../../buffers/cancel.ts";

type ForwardRequest = Extract<ShardRequest, { method: string }>;

function toReply(res: CoreResponse): Reply {
  const meta: ShardReply = { status: res.status, headers: res.headers };
  return { meta, body: res.body };
}

function jsonResponse(status: number, value: unknown): CoreResponse {
  return {
    status,
    headers: { "content-type": "application/json; charset=utf-8" },
    body: Buffer.from(JSON.stringify(value)),
  };
}

async function coreRequest(request: ForwardRequest, body: IncomingBody): Promise<CoreRequest> {
  const chunks = await body.collect();
  return {
    method: request.method,
    path: request.path,
    query: request.query,
    headers: request.headers,
    body: chunks.length === 1 ? chunks[0] : Buffer.concat(chunks),
  };
}

/** Records bodies up to this size go to the router in one frame, not as a stream. */
export const WHOLE_RECORDS_BYTES = 1 << 20;

/**
 * A journal-backed records body of at most WHOLE_RECORDS_BYTES read into one buffer: the
 * router then answers it as a plain reply (one frame, content-length) instead of piping a
 * stream of frames, which cost it ~60% more CPU per GET (bench:hop's records route). A
 * body that reads short fails the request (the router's 502), never a short 200.
 */
export async function wholeRecords(res: CoreResponse): Promise<CoreResponse> {
  const body = res.body;
  if (!(body instanceof RecordStream) || body.byteLength > WHOLE_RECORDS_BYTES) return res;
  const whole = Buffer.allocUnsafe(body.byteLength);
  let at = 0;
  for await (const piece of body) {
    piece.copy(whole, at); // copies no more than fits: a longer body fails the check below
    at += piece.length;
    release(piece);
  }
  if (at !== whole.length) throw new Error(`records body of ${at} bytes, not its ${whole.length}`);
  return { ...res, body: whole };
}

const collected = (chunks: Buffer[]) => (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));

/** The path (below /sessions/{id}) of the Anthropic Messages route, which the router sends as a chat op. */
const MESSAGES_PATH = "/v1/messages";

/**
 * Runs one chat turn that abort-turns can stop: registered before its first await, so an
 * abort-turns behind it on the channel finds it. Stopped before its commit, it answers a
 * retryable 503; a turn that committed first answers as it did (the commit decides, under
 * the session lock: session-core.ts). A streamed turn stays registered until its body is
 * over: stopped midway, its stream ends with the error event instead of [DONE].
 */
async function abortableTurn(
  turns: Map<Cancel, string>,
  sessionId: string,
  caller: CancelSignal,
  run: (signal: CancelSignal) => Promise<CoreResponse>,
): Promise<CoreResponse> {
  // One controller for both: a pause aborts it, and so does the caller leaving (cheaper
  // per turn than AbortSignal.any, which Node 20 tracks with weak references).
  const pause = new Cancel();
  const onCaller = () => pause.abort(caller.reason);
  if (caller.aborted) onCaller();
  else caller.addEventListener("abort", onCaller, { once: true });
  turns.set(pause, sessionId);
  let streaming = false;
  try {
    const res = await run(pause.signal);
    if (isStream(res.body)) {
      streaming = true;
      const over = () => {
        caller.removeEventListener("abort", onCaller);
        turns.delete(pause);
      };
      return { ...res, body: whileOpen(res.body, caller, over) };
    }
    if (!pause.signal.aborted || res.status === 200) return res;
    const reason: unknown = pause.signal.reason;
    return errorResponse(reason instanceof TurnAbortedError ? reason : new TurnAbortedError());
  } finally {
    // A stream's engine request runs on until its body is over (whileOpen above).
    if (!streaming) {
      caller.removeEventListener("abort", onCaller);
      turns.delete(pause);
    }
  }
}

const isStream = (body: CoreResponse["body"]): body is AsyncIterable<Buffer> =>
  !Buffer.isBuffer(body) && !Array.isArray(body);

/** `body` as it is, running `done` once when it is over, or when the caller gives up before reading it. */
function whileOpen(body: AsyncIterable<Buffer>, caller: CancelSignal, done: () => void): AsyncIterable<Buffer> {
  let over = false;
  const end = () => {
    if (over) return;
    over = true;
    caller.removeEventListener("abort", end);
    done();
  };
  caller.addEventListener("abort", end, { once: true });
  return (async function* () {
    try {
      yield* body;
    } finally {
      end();
    }
  })();
}

/** Without `parked`, a get's handoff ticket is ignored and the body goes back on the channel. */
export function workerHandler(
  core: SessionCore,
  metrics: WorkerMetrics,
  parked?: ParkedResponses,
  messages: MessagesTurnOptions = {},
  door?: WorkerDoor,
): Handler {
  /** The chat turns in flight, with their sessions' ids. */
  const turns = new Map<Cancel, string>();
  return async (req) => {
    const read = readShardRequest(req.meta);
    // Checked before anything is counted, so a bad op never becomes a metrics label.
    if (!read.ok) throw new ShardRequestError(read.problem);
    const request = read.request;
    const track = (run: () => Promise<CoreResponse>) => metrics.track(request.op, run).then(toReply);
    switch (request.op) {
      case "metrics":
        return toReply(jsonResponse(200, metrics.json(request.gc === true ? fullGc : undefined)));
      case "health":
        return toReply(core.health());
      case "list": {
        const page: ListPage = core.list(request.after, request.limit, {
          detail: request.detail === true,
          prefix: request.prefix ?? "",
        });
        return toReply(jsonResponse(200, page));
      }
      case "create":
        return track(async () => core.create(request.sessionId || undefined, collected(await req.body.collect())));
      case "get": {
        const ticket = request.handoff;
        const res = await metrics.track(request.op, () => core.get(request.sessionId));
        if (ticket === undefined || parked === undefined || res.status !== 200 || !parked.takes(res))
          return toReply(await wholeRecords(res));
        parked.park(ticket, res);
        const meta: ShardReply = { status: res.status, headers: res.headers, handoff: true };
        return { meta };
      }
      case "delete":
        return track(() => core.delete(request.sessionId));
      case "tree":
        return track(() => core.tree(request.sessionId));
      case "chat": {
        // The Anthropic Messages route is a chat turn too, answered in its own shapes (messages-turn.ts).
        const anthropic = request.path === MESSAGES_PATH;
        const run = async (signal: CancelSignal) => {
          const turn = await coreRequest(request, req.body);
          door?.sent(request.weightVersion);
          const context = { weightVersion: request.weightVersion ?? null };
          return anthropic
            ? messagesTurn(core, request.sessionId, turn, signal, context, messages)
            : core.chat(request.sessionId, turn, signal, context);
        };
        return track(() =>
          abortableTurn(turns, request.sessionId, req.signal, run).then((res) =>
            anthropic ? asAnthropicError(res) : res,
          ),
        );
      }
      case "abort-turns": {
        const aborted = turns.size;
        for (const turn of turns.keys()) turn.abort(new TurnAbortedError());
        return toReply(jsonResponse(200, { aborted }));
      }
      case "door":
        door?.set(request.paused, request.mode, request.weightVersion);
        return toReply(jsonResponse(200, { paused: request.paused }));
      case "abort-session": {
        // Finished first: a turn the abort stops can then never commit, nor can a later one start.
        const res = await core.finish(request.sessionId);
        if (res.status !== 200) return toReply(res);
        let aborted = 0;
        for (const [turn, sessionId] of turns)
          if (sessionId === request.sessionId) {
            turn.abort(new TurnAbortedError("finished"));
            aborted++;
          }
        return toReply(jsonResponse(200, { session_id: request.sessionId, finished: true, aborted_turns: aborted }));
      }
      case "fork": {
        const { shard, workers, forkId } = request;
        const placement = {
          mintedId: forkId,
          owns: (id: string) => shardOf(id, workers) === shard,
          hint: ` (shard ${shard} of ${workers} workers)`,
        };
        const res = await metrics.track(request.op, async () =>
          core.fork(request.sessionId, collected(await req.body.collect()), placement),
        );
        if (res.status === 201) metrics.forked();
        return toReply(res);
      }
      case "samples":
        return track(async () => core.samples(request.sessionId, await coreRequest(request, req.body)));
      case "proxy":
        return track(async () => core.proxy(request.sessionId, await coreRequest(request, req.body), req.signal));
      default:
        return unhandled(request);
    }
  };
}

/**
 * A full GC. --expose-gc is on for workers (session-server.ts). Node 20's gc() does a full
 * collection only without arguments (with an options object it ran a minor one here). Three
 * in a row: what one collection's finalizers let go is freed by the next, and bench:memory's
 * fork case read 13.7-17.7 B per token held after one, 17.3-17.7 after three, same code
 * (docs/benchmark-history.md). The heap pages freed go back to the OS a moment later.
 */
function fullGc(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let i = 0; i < 3; i++) gc?.();
}

// An op added to ShardRequest but not to the switch above makes `request` not `never`
// there, so the typecheck fails; at run time it would still be a coded error.
function unhandled(request: never): never {
  throw new ShardRequestError(`op ${String((request as { op: unknown }).op)} has no handler in this worker`);
}
