// The body of a streamed chat turn (`stream: true`), as the session core hands it to the
// worker: the adapter's `chat.completion.chunk` events passed on one by one as the engine
// generates, then the commit rule of docs/http.md: the turn is committed (verified,
// recorded, journaled, checkpointed) after the engine's last chunk and before
// `data: [DONE]`; if the commit fails, an error event takes the place of `[DONE]`. An engine
// failure midway ends the stream with an error event, nothing committed. A reader that
// stops early (the client went away: the transport stops pulling and calls `return()`)
// stops the engine request and nothing is committed, so the same turn can be sent again.
// Every event is its own Buffer, so each reaches the client as one piece.
import type { EngineCompletion, EngineStream } from "./engine-port.ts";
import { sseDone, sseError } from "./sse.ts";

export async function* streamedTurn(
  events: EngineStream["events"],
  commit: (completion: EngineCompletion) => Promise<void>,
  onFailure: (err: unknown, stage: "engine" | "commit") => void,
  signal?: AbortSignal,
): AsyncGenerator<Buffer, void, undefined> {
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
    onFailure(err, "engine");
    yield sseError(err);
    return;
  } finally {
    // Stopped before the engine's last chunk (an error, or the reader left): stop the engine too.
    if (completion === undefined) await events.return(undefined as never).catch(() => {});
  }
  try {
    // The client went away after the engine's last chunk but before [DONE]: not committed.
    if (signal?.aborted === true) return;
    await commit(completion);
  } catch (err) {
    onFailure(err, "commit");
    yield sseError(err);
    return;
  } finally {
    completion.release?.();
  }
  yield sseDone();
}
