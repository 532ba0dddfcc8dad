// The public surface of transport/: framed, multiplexed channels over Unix sockets.
// Nothing outside this folder imports any other transport file.

export { Channel } from "./channel.ts";
export type { ChannelOptions, ChannelStats, Handler, IncomingReply, IncomingRequest, Meta, Reply } from "./channel.ts";
export type { IncomingBody } from "./incoming-body.ts";
export type { OutBody } from "./body-plan.ts";
export { connectChannel, listenChannels, type ChannelServer } from "./socket-path.ts";
export { WRITTEN, release, type Releasable } from "../buffers/release.ts";
export {
  ChannelClosedError,
  FrameTooLargeError,
  InvalidBodyError,
  NoHandlerError,
  ProtocolError,
  RemoteError,
  RequestAbortedError,
  SocketInUseError,
  TransportError,
  transportErrorCodes,
  type ErrorClass,
} from "./errors.ts";
