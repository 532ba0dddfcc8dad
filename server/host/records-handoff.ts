// The host's one part on a request's path (docs/architecture.md, "The records handoff"):
// the router sends a records GET's client socket with a RecordsHandoff, and since only a
// parent and its child can pass a handle, it comes through here to the worker that kept the
// response. It goes on at once, synchronously, to the running process of that shard and
// epoch; when there is none (the worker died or restarted since it replied), the client
// gets the router's 503 from here and the socket is closed, so a dead worker never leaves a
// request hanging. The host reads nothing from the socket and writes nothing else to it.
import { Socket } from "node:net";
import type { SupervisionTree } from "../../actors/index.ts";
import { adoptSocket, writeErrorResponse } from "../handoff/raw-http-response.ts";
import { isRecordsHandoff } from "../handoff/records-handoff-message.ts";

const ROUTER = "router";

export function forwardRecordsHandoff(tree: SupervisionTree, from: string, message: unknown, handle: unknown): void {
  // No socket: the client had left before the router sent it; nobody to answer.
  if (!(handle instanceof Socket)) return;
  adoptSocket(handle);
  if (from !== ROUTER || !isRecordsHandoff(message)) {
    handle.destroy();
    return;
  }
  // Sent (the worker said it holds it) or lost (it stayed silent 10 s): ours goes. Refused:
  // no worker took it, even one that died a moment ago (child-process.ts), so the client
  // gets the router's 503 from here.
  tree.sendSocket(`shard-${message.shard}`, message.epoch, message, handle, (outcome) => {
    if (outcome === "refused") writeErrorResponse(handle, message.headers, message.refusal);
    else handle.destroy();
  });
}
