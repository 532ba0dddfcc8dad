// A streamed turn on a token-level engine API (`sglang-generate`, `vllm-completions`): the
// engine is asked with `stream: true`, its event stream is read (sse-reader.ts) chunk by
// chunk by the API's reader (generate-stream.ts, completions-stream.ts), the text it adds
// goes through the family's incremental parse (sessions/completion-stream.ts), and what
// becomes certain goes to the client at once as `chat.completion.chunk` events
// (chat-chunks.ts). The text is the engine's own, as in a turn that is not streamed (both
// engines leave a matched stop token or stop string out of it, and neither splits a
// character: they hold back an unfinished one); a tail that may still be cut off is held
// here too. The client's first byte waits for the engine's first chunk, so a reply the
// engine refuses, or whose first chunk is unusable, is still a plain HTTP error. After the
// engine's last chunk the generator returns the completion; committing it, and sending
// `data: [DONE]`, are the session core's (sessions/streamed-turn.ts).
import type { EngineCompletion, EngineTurn, EngineTurnRequest } from "../sessions/engine-port.ts";
import { CompletionStream } from "../sessions/completion-stream.ts";
import { EngineReplyError } from "../sessions/errors.ts";
import { SSE_HEADERS } from "../sessions/sse.ts";
import { countAbort, turnHeaders, type AdapterOptions } from "./adapter.ts";
import { ChatChunks, chunkId, includeUsage } from "./chat-chunks.ts";
import { isDone, sseEvents } from "./sse-reader.ts";
import { finishReasonOf, messageOf } from "./token-reply.ts";

/** What one engine chunk added. */
export interface TokenStep {
  /** New completion text (possibly empty). */
  text: string;
  /** The engine's last chunk: it carried the finish reason. */
  last: boolean;
}

/** After the last chunk: the whole completion, and the record's response (a non-streamed reply's shape). */
export interface TokenStreamResult {
  text: string;
  completionIds: number[];
  finish: "stop" | "length";
  /** The request's stop string that ended the completion, when the engine names one. */
  matchedStop?: string;
  response: Buffer[];
  /** The engine's policy version, when its reply names one (SGLang's meta_info.weight_version). */
  engineWeightVersion?: string;
}

export interface TokenStreamReader {
  /** One event's data (never `[DONE]`); throws a coded error for an error event or an unusable chunk. */
  read(data: Buffer): TokenStep;
  result(promptLength: number): TokenStreamResult;
}

const EVENT_STREAM = /^\s*text\/event-stream\b/i;

export async function streamTurn(
  options: AdapterOptions,
  turn: EngineTurnRequest,
  path: string,
  request: Buffer[],
  reader: TokenStreamReader,
  stop: readonly string[] | undefined,
): Promise<EngineTurn> {
  const res = await options.upstream.send({
    method: "POST",
    path,
    headers: { ...turnHeaders(options, turn.headers, turn.routingKey), accept: "text/event-stream" },
    body: request,
    signal: turn.signal,
    stream: true,
  });
  if (res.stream === undefined) return { ok: false, status: res.status, headers: res.headers, body: res.body };
  const body = res.stream;
  const events = sseEvents(body);
  let first: TokenStep;
  try {
    if (!EVENT_STREAM.test(res.headers["content-type"] ?? ""))
      throw new EngineReplyError(
        `the engine answered stream: true with ${JSON.stringify(res.headers["content-type"] ?? "no content-type")}, not an event stream`,
      );
    first = await nextStep(events, reader);
  } catch (err) {
    await events.return();
    body.cancel(); // the events were perhaps never read: the connection must go all the same
    throw countAbort(options, err);
  }
  const model = typeof turn.body.model === "string" ? turn.body.model : "";
  const tools = Array.isArray(turn.body.tools) ? turn.body.tools : undefined;
  const parser = new CompletionStream(turn.family, { tools, kwargs: turn.templateKwargs, stop });
  const chunks = new ChatChunks({ id: chunkId(), created: Math.floor(Date.now() / 1000), model });

  async function* run(): AsyncGenerator<Buffer, EngineCompletion, undefined> {
    try {
      return yield* steps();
    } catch (err) {
      throw countAbort(options, err);
    } finally {
      // A stream left early drops its connection (the engine aborts the request).
      await events.return();
      body.cancel();
    }
  }
  async function* steps(): AsyncGenerator<Buffer, EngineCompletion, undefined> {
    yield chunks.role();
    for (let step = first; ; step = await nextStep(events, reader)) {
      for (const event of chunks.delta(parser.append(step.text))) yield event;
      if (step.last) break;
    }
    // The engine ends with [DONE] after its last chunk: read to the end, so the connection is kept.
    for (let next = await events.next(); next.done !== true; next = await events.next());
    const result = reader.result(turn.promptIds.length);
    const { delta, parsed } = parser.finish(result.text);
    options.onMalformedToolCalls?.(parsed.malformedToolCalls);
    for (const event of chunks.delta(delta)) yield event;
    const message = messageOf(parsed);
    yield chunks.finish(finishReasonOf(result.finish, message), result.matchedStop);
    const n = result.completionIds.length;
    const prompt = turn.promptIds.length;
    if (includeUsage(turn.body))
      yield chunks.usage({ prompt_tokens: prompt, completion_tokens: n, total_tokens: prompt + n });
    return {
      ok: true,
      path,
      requestHasConversation: false, // the request sent upstream holds only ids
      request,
      response: result.response,
      completionIds: result.completionIds,
      engineWeightVersion: result.engineWeightVersion,
      message,
      clientBody: [],
      headers: { ...SSE_HEADERS },
    };
  }
  return { ok: true, headers: { ...SSE_HEADERS }, events: run(), cancel: () => body.cancel() };
}

async function nextStep(
  events: AsyncGenerator<Buffer, void, undefined>,
  reader: TokenStreamReader,
): Promise<TokenStep> {
  const next = await events.next();
  if (next.done === true || isDone(next.value))
    throw new EngineReplyError("the engine's stream ended before its last chunk (none carried a finish reason)");
  return reader.read(next.value);
}
