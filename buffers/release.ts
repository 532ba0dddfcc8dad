// The release protocol of buffers that belong to someone else's pool. A Buffer may carry
// a function under WRITTEN (a global symbol, so producers and consumers outside the
// transport need not import it); whoever ends up holding the buffer calls it, at most
// once, when nothing will read its bytes any more: the outbound scheduler after the
// socket has taken them, a body queue when it drops unread pieces, the router after
// relaying a piece. A buffer without one is ordinary memory, left to the GC.

/** Property of a pooled Buffer: returns its memory to the pool. */
export const WRITTEN: unique symbol = Symbol.for("tito.transport.written") as never;
export type Releasable = Buffer & { [WRITTEN]?: () => void };

/** Calls `buffer`'s release, if it has one. */
export function release(buffer: Buffer): void {
  callRelease((buffer as Releasable)[WRITTEN]);
}

/** Calls a release function, if any; a failing release is the pool's own problem. */
export function callRelease(fn: (() => void) | undefined): void {
  if (fn === undefined) return;
  try {
    fn();
  } catch {
    // a producer's bookkeeping never fails its consumer
  }
}
