// The release protocol of buffers that belong to someone else's pool. A Buffer may carry
// a function under WRITTEN; whoever ends up holding the buffer calls it, at most once in
// effect, when nothing will read its bytes any more: the outbound scheduler after the
// socket has taken them, a body queue when it drops unread pieces, the router after
// relaying a piece. A buffer without one is ordinary memory, left to the GC.
// Producers (transport read slabs, journal record streams) attach a release with
// `releasable`; consumers call `release`. Both sides import this one symbol: it is a
// module symbol, not a global one, so the protocol is an import a reader can follow.

/** Property of a pooled Buffer: returns its memory to the pool. */
export const WRITTEN: unique symbol = Symbol("tito.buffers.written");
export type Releasable = Buffer & { [WRITTEN]?: () => void };

/**
 * Gives `view` a release under WRITTEN that runs `onRelease` the first time it is called;
 * later calls do nothing, so a consumer that releases twice cannot free memory twice.
 */
export function releasable(view: Buffer, onRelease: () => void): Releasable {
  let released = false;
  (view as Releasable)[WRITTEN] = () => {
    if (released) return;
    released = true;
    onRelease();
  };
  return view as Releasable;
}

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
