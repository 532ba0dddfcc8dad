// Backpressure for whoever writes pooled buffers to a stream (the router relaying a body,
// the records handoff writing to a client's socket): after write() returned false, wait
// until the stream takes more, or is gone.
import type { EventEmitter } from "node:events";

/**
 * Resolves on the stream's next 'drain' or 'close', whichever comes first; at once if the
 * stream is destroyed already. A write to a destroyed stream returns false, and its 'close'
 * may have come and gone: waiting for it would hang the writer, and whatever it holds
 * (pinned journal segments, open files) with it.
 */
export function drained(stream: Pick<EventEmitter, "on" | "off"> & { readonly destroyed: boolean }): Promise<void> {
  if (stream.destroyed) return Promise.resolve();
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
