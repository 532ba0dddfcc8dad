// One request and its reply as the engine client tracks it: where the body's bytes go (the
// caller's pooled slabs, one buffer of the announced length, or copies when the length is
// unknown), and what is learned from them as they arrive, while they are still in cache:
// the offsets of every '"' (the reply scan then skips a many-MiB string without reading it
// again) and the body's CRC-32 (the journal entry that stores the reply needs it).
import { crc32 } from "../buffers/crc32.ts";
import type { ReplyCollector } from "./reply-buffers.ts";
import type { ReplyStream } from "./reply-stream.ts";
import type { UpstreamRequest, UpstreamResponse } from "./upstream-types.ts";

const QUOTE = 0x22;

/** A client failure with the `code` upstream.ts maps to a coded 502. */
export function httpError(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

/** One request and its reply on a connection (a retry is a new Exchange). */
export class Exchange {
  readonly req: UpstreamRequest;
  readonly resolve: (res: UpstreamResponse) => void;
  readonly reject: (err: Error) => void;
  /** Sends the request once more on a new connection; false when that is not allowed. */
  readonly retry: () => boolean;
  conn: { abort(reason: Error): void } | undefined;
  status = 0;
  headers: Record<string, string> = {};
  keepAlive = true;
  received = false; // any reply byte came
  collector: ReplyCollector | undefined;
  single: Buffer | undefined; // a body of known length, not pooled
  fill = 0;
  parts: Buffer[] = []; // a body of unknown length, as copies
  /** A streamed reply (the request asked for `stream` and got a 200): body bytes go here as they come. */
  stream: ReplyStream | undefined;
  done = false;
  bodyBytes = 0;
  readonly quotes: number[] = [];
  crc = 0;

  constructor(
    req: UpstreamRequest,
    resolve: (res: UpstreamResponse) => void,
    reject: (err: Error) => void,
    retry: () => boolean,
  ) {
    this.req = req;
    this.resolve = resolve;
    this.reject = reject;
    this.retry = retry;
  }

  /** Room for up to `max` body bytes of a known-length body. */
  space(max: number): Buffer {
    if (this.collector !== undefined) return this.collector.space(max);
    return this.single!.subarray(this.fill, this.fill + max);
  }

  /** Counts `n` body bytes the socket read into `space` (the view `bytes`). */
  wrote(bytes: Buffer, n: number): void {
    this.#index(bytes.subarray(0, n));
    if (this.collector !== undefined) this.collector.wrote(n);
    else this.fill += n;
  }

  #index(bytes: Buffer): void {
    const at = this.bodyBytes;
    for (let i = bytes.indexOf(QUOTE); i !== -1; i = bytes.indexOf(QUOTE, i + 1)) this.quotes.push(at + i);
    this.crc = crc32(bytes, this.crc);
    this.bodyBytes += bytes.length;
  }

  /** Body bytes that came through the scratch buffer: copied, since the scratch is reused. */
  append(bytes: Buffer): void {
    if (bytes.length === 0) return;
    if (this.stream !== undefined) return this.stream.push(Buffer.from(bytes));
    this.#index(bytes);
    if (this.collector !== undefined) this.collector.push(bytes);
    else if (this.single !== undefined) {
      bytes.copy(this.single, this.fill);
      this.fill += bytes.length;
    } else this.parts.push(Buffer.from(bytes));
  }

  body(): Buffer[] {
    if (this.collector !== undefined) return this.collector.parts();
    if (this.single !== undefined) return this.single.length > 0 ? [this.single] : [];
    return this.parts;
  }
}
