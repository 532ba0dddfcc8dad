// Decides how an outgoing body travels: nothing, one frame (small Buffer / Buffer[]),
// or a stream of chunks (anything larger, or any async iterable). A body is never
// copied or concatenated here; a big Buffer is cut into chunks later by subarray.

import { Flag } from "./frame-codec.ts";
import { InvalidBodyError } from "./errors.ts";
import type { StreamSource } from "./outbound-scheduler.ts";

export type OutBody = Buffer | Buffer[] | AsyncIterable<Buffer> | undefined;

export type BodyPlan =
  | { flags: typeof Flag.BODY_NONE }
  | { flags: typeof Flag.BODY_SINGLE; parts: Buffer[]; bytes: number }
  | { flags: typeof Flag.BODY_STREAM; source: StreamSource };

const NONE: BodyPlan = { flags: Flag.BODY_NONE };

export function planBody(body: OutBody, chunkBytes: number): BodyPlan {
  if (body === undefined || body === null) return NONE;
  if (body instanceof Uint8Array) {
    const u8: Uint8Array = body;
    const b = Buffer.isBuffer(u8) ? u8 : Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
    if (b.length === 0) return NONE;
    if (b.length <= chunkBytes) return { flags: Flag.BODY_SINGLE, parts: [b], bytes: b.length };
    return { flags: Flag.BODY_STREAM, source: [b] };
  }
  if (Array.isArray(body)) {
    let bytes = 0;
    for (const b of body) {
      if (!(b instanceof Uint8Array)) throw new InvalidBodyError(`a body array holds ${typeof b}, not a Buffer`);
      bytes += b.length;
    }
    if (bytes === 0) return NONE;
    if (bytes <= chunkBytes) return { flags: Flag.BODY_SINGLE, parts: body.filter((b) => b.length > 0), bytes };
    return { flags: Flag.BODY_STREAM, source: body };
  }
  if (typeof (body as AsyncIterable<Buffer>)[Symbol.asyncIterator] === "function") {
    return { flags: Flag.BODY_STREAM, source: body as AsyncIterable<Buffer> };
  }
  throw new InvalidBodyError(`unsupported body type ${Object.prototype.toString.call(body)}`);
}
