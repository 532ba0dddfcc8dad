// Errors on the wire, by code: a thrown error becomes {code, status, message, data}
// in a frame header, and the receiver rebuilds the class registered for the code.
// Never sends stacks or causes across (they belong to the process that threw).

import { RemoteError, type ErrorClass } from "./errors.ts";

export interface WireError {
  code?: string;
  status?: number;
  message: string;
  data?: unknown;
}

export function errorToWire(err: unknown): WireError {
  if (err === null || typeof err !== "object") return { message: String(err) };
  const e = err as { code?: unknown; status?: unknown; message?: unknown; data?: unknown };
  const wire: WireError = { message: typeof e.message === "string" ? e.message : String(err) };
  if (typeof e.code === "string") wire.code = e.code;
  if (typeof e.status === "number") wire.status = e.status;
  if (e.data !== undefined) wire.data = e.data;
  return wire;
}

export function errorFromWire(meta: unknown, table: Record<string, ErrorClass>): Error {
  const w = (meta ?? {}) as Partial<WireError>;
  const message = typeof w.message === "string" ? w.message : "remote error";
  const code = typeof w.code === "string" ? w.code : undefined;
  const status = typeof w.status === "number" ? w.status : undefined;
  const Known = code === undefined ? undefined : table[code];
  if (Known === undefined || Known === RemoteError) {
    return new RemoteError(message, w.data, { code, status });
  }
  const err = new Known(message, w.data) as Error & { code?: unknown; status?: unknown };
  // A registered class normally sets both itself; make sure the peer's values win
  // (a class shared by several statuses, or one that does not set them).
  if (err.code !== code) Object.defineProperty(err, "code", { value: code, enumerable: true });
  if (status !== undefined && err.status !== status)
    Object.defineProperty(err, "status", { value: status, enumerable: true });
  return err;
}
