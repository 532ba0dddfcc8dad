// Backpressure for whoever writes pooled buffers to a stream (the router relaying a body,
// the records handoff writing to a client's socket): after write() returned false, wait
// until the stream takes more, or is gone.
import type { EventEmitter } from "node:events";

/** Resolves on the stream's next 'drain' or 'close', whichever comes first. */
export function drained(stream: Pick<EventEmitter, "on" | "off">): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stream.off("drain", done);
      stream.off("close", done);
      resolve();
    };
    stream.on("drain", done);
    stream.on("close", done);
  });
}
