// The request and reply of one engine HTTP exchange, as the upstream client (upstream.ts)
// and the HTTP client under it (http-client.ts, http-exchange.ts) pass them. Types only,
// in a module of their own: the client and the upstream wrapper both need them, and
// neither may import the other's implementation back.
import type { ReplyBuffers } from "./reply-buffers.ts";
import type { ReplyStream } from "./reply-stream.ts";
import type { CancelSignal } from "../buffers/cancel.ts";

export interface UpstreamRequest {
  method: string;
  /** Path below the engine root, with "?query" when there is one. */
  path: string;
  headers: Record<string, string>;
  /** One Buffer, or the parts of one body, written in order (never joined). */
  body?: Buffer | readonly Buffer[];
  signal?: CancelSignal;
  /** Receive a large reply into these pooled buffers; the caller must then call `release`. */
  pooled?: ReplyBuffers;
  /** A 200 reply is handed on at its head, its body read from `stream` as it comes (an SSE stream). */
  stream?: boolean;
}

export interface UpstreamResponse {
  status: number;
  headers: Record<string, string>;
  /** The body as received, chunk by chunk: never concatenated (fresh memory is slow to fill). */
  body: Buffer[];
  /** Set when the body lives in pooled buffers: hands them back; the body is invalid after. */
  release?: () => void;
  /** The offsets of every '"' byte in the body, ascending, when the client indexed them. */
  quotes?: readonly number[];
  /** CRC-32 of the whole body, when the client computed it as the bytes arrived. */
  crc?: number;
  /** A streamed 200 (`stream` was asked for): the body, as it arrives; `body` is empty. */
  stream?: ReplyStream;
}

export type Send = (req: UpstreamRequest) => Promise<UpstreamResponse>;
