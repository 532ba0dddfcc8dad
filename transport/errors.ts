// Coded errors of the transport layer (docs/architecture.md, "Errors"). Every class has a stable
// `code` that is never reused, an HTTP-ish `status` the router may map, and optional
// `data`. The constructors take (message, data?) so error-codec.ts can rebuild any of
// them from the wire by code. This file must never import from sessions/ or server/.
// test/transport/errors.test.ts checks every code is documented in docs/errors.md.

import { CodedError } from "../buffers/coded-error.ts";

/** The transport layer's errors: one base, so a caller can tell the layer. */
export class TransportError extends CodedError {}

/** The channel is closed (peer exit, EOF, socket error, corruption or explicit close). */
export class ChannelClosedError extends TransportError {
  constructor(message = "transport channel closed", data?: unknown, options?: { cause?: unknown }) {
    super("TITO_ERR_CHANNEL_CLOSED", 503, message, { data, cause: options?.cause });
  }
}

/** The caller cancelled the request (its AbortSignal fired). */
export class RequestAbortedError extends TransportError {
  constructor(message = "transport request aborted", data?: unknown) {
    super("TITO_ERR_REQUEST_ABORTED", 499, message, { data });
  }
}

/** A frame is larger than maxFrameBytes: refused at send time, or a corrupt length on receive. */
export class FrameTooLargeError extends TransportError {
  constructor(message: string, data?: unknown) {
    super("TITO_ERR_FRAME_TOO_LARGE", 500, message, { data });
  }
}

/** The peer sent bytes that are not a valid frame (bad lengths, kind, id parity, header). */
export class ProtocolError extends TransportError {
  constructor(message: string, data?: unknown) {
    super("TITO_ERR_TRANSPORT_PROTOCOL", 500, message, { data });
  }
}

/** A request arrived on a channel side that never called serve(). */
export class NoHandlerError extends TransportError {
  constructor(message = "no request handler on this channel", data?: unknown) {
    super("TITO_ERR_NO_HANDLER", 500, message, { data });
  }
}

/** A body to send is not a Buffer, Buffer[] or (async) iterable of Buffers. */
export class InvalidBodyError extends TransportError {
  constructor(message: string, data?: unknown) {
    super("TITO_ERR_INVALID_BODY", 500, message, { data });
  }
}

/** listenChannels found a live server already listening on the socket path. */
export class SocketInUseError extends TransportError {
  constructor(message: string, data?: unknown) {
    super("TITO_ERR_SOCKET_IN_USE", 500, message, { data });
  }
}

export const REMOTE_FAILED_CODE = "TITO_ERR_REMOTE_FAILED";

/**
 * The peer's handler failed. With a code unknown at this side it carries the peer's
 * code, status and message; a throw without a code arrives as TITO_ERR_REMOTE_FAILED.
 */
export class RemoteError extends TransportError {
  constructor(message: string, data?: unknown, remote?: { code?: string; status?: number }) {
    super(remote?.code ?? REMOTE_FAILED_CODE, remote?.status ?? 500, message, { data });
  }
}

export type ErrorClass = new (message: string, data?: unknown) => Error;

/** The transport's own codes, rebuilt as their classes when they cross a channel. */
export const transportErrorCodes: Record<string, ErrorClass> = {
  TITO_ERR_CHANNEL_CLOSED: ChannelClosedError,
  TITO_ERR_REQUEST_ABORTED: RequestAbortedError,
  TITO_ERR_FRAME_TOO_LARGE: FrameTooLargeError,
  TITO_ERR_TRANSPORT_PROTOCOL: ProtocolError,
  TITO_ERR_NO_HANDLER: NoHandlerError,
  TITO_ERR_INVALID_BODY: InvalidBodyError,
  TITO_ERR_SOCKET_IN_USE: SocketInUseError,
  [REMOTE_FAILED_CODE]: RemoteError,
};
