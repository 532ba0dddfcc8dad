// The body of a streamed chat turn (`stream: true`), as the session core hands it to the
// worker: the adapter's `chat.completion.chunk` events passed on one by one as the engine
// generates, then the commit rule of docs/http.md: the turn is committed (verified,
// recorded, journaled, checkpointed) after the engine's last chunk and before
// `data: [DONE]`; if the commit fails, an error event takes the place of `[DONE]`. An engine
// failure midway ends the stream with an error event, nothing committed. A reader that
// stops early (the client went away: the transport stops pulling and calls `return()`)
// stops the engine request and nothing is committed, so the same turn can be sent again;
// so does a caller that gives up before the body is read at all (`signal`).
// Every event is its own Buffer, so each reaches the client as one piece.
import type { EngineCompletion, EngineStream } from "./engine-port.ts";
import { sseDone, sseError } from "./sse.ts";
import type { CancelSignal } from "../buffers/cancel.ts";

export interface StreamedTurnOptions {
  /** Steps 4 and 5 of the turn: verify, record, apply. */
  commit(completion: EngineCompletion): Promise<void>;
  /** The turn failed after its first event (a log line). */
  onFailure(err: unknown, stage: "engine" | "commit"): void;
  /** Runs once when the stream is over, however it ended (the session is no longer busy). */
  onSettled?(): void;
  /** The caller's: aborted when its client went away. */
  signal?: CancelSignal;
}

export function streamedTurn(stream: EngineStream, options: StreamedTurnOptions): AsyncGenerator<Buffer> {
  let started = false;
  let settled = false;
  const settle = () => {
    if (settled) return;
    settled = true;
    options.signal?.removeEventListener("abort", dropped);
    stream.cancel();
    options.onSettled?.();
  };
  // A body nobody ever reads (the request was cancelled before its reply went out) still ends.
  const dropped = () => {
    if (!started) settle();
  };
  if (options.signal?.aborted === true) dropped();
  else options.signal?.addEventListener("abort", dropped, { once: true });

  async function* run(): AsyncGenerator<Buffer, void, undefined> {
    started = true;
    try {
      const events = stream.events;
      let completion: EngineCompletion | undefined;
      try {
        for (;;) {
          const next = await events.next();
          if (next.done === true) {
            completion = next.value;
            break;
          }
          yield next.value;
        }
      } catch (err) {
        options.onFailure(err, "engine");
        yield sseError(err);
        return;
      } finally {
        // Stopped before the engine's last chunk (an error, or the reader left): stop the engine too.
        if (completion === undefined) await events.return(undefined as never).catch(() => {});
      }
      try {
        // The client went away after the engine's last chunk but before [DONE]: not committed.
        if (options.signal?.aborted === true) return;
        await options.commit(completion);
      } catch (err) {
        options.onFailure(err, "commit");
        yield sseError(err);
        return;
      } finally {
        completion.release?.();
      }
      yield sseDone();
    } finally {
      settle();
    }
  }
  return run();
}
