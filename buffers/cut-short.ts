// How every writer of a response ends one it could not complete (docs/http.md, "GET
// /sessions/{id}"): with a TCP reset (RST), so that the client's next read fails
// (ECONNRESET) whatever the framing. A plain close sends a FIN, which after a
// close-delimited body (HTTP/1.0, no content-length) passes for the body's end. Bytes still
// queued for the client are dropped: they belong to a response that is cut anyway.
import type { Socket } from "node:net";

export function cutShort(socket: Socket | null | undefined): void {
  if (!socket || socket.destroyed) return;
  try {
    socket.resetAndDestroy();
  } catch {
    socket.destroy(); // not a TCP handle (a pipe): a close is all there is
  }
}
