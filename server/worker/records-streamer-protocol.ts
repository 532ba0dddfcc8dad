// What a worker and its records streamer say over their IPC channel (records-streamer.ts).
// Small JSON messages; the one handle is the client's socket, sent with StreamRecords.
import type { PortablePart } from "../../sessions/journal/record-stream.ts";
import type { RawHeaders } from "../handoff/raw-http-response.ts";

/** A body part on the IPC channel (JSON): bytes as base64, file ranges by path. */
export type WirePart = { base64: string } | { path: string; fd: number; position: number; length: number };

/** Worker -> streamer, with the client's socket as the handle. */
export interface StreamRecords {
  type: "stream-records";
  id: number;
  status: number;
  headers: RawHeaders[];
  parts: WirePart[];
}

/** Streamer -> worker: the response `id` is over, whole or not; its files are closed. */
export interface RecordsStreamed {
  type: "records-streamed";
  id: number;
  complete: boolean;
  bytes: number;
}

/** What the worker passes its streamer (TITO_CHILD_CONFIG). */
export interface StreamerConfig {
  nice: number;
}

export function isStreamRecords(message: unknown): message is StreamRecords {
  const m = message as Partial<StreamRecords> | null;
  return (
    typeof m === "object" &&
    m !== null &&
    m.type === "stream-records" &&
    Number.isInteger(m.id) &&
    Number.isInteger(m.status) &&
    Array.isArray(m.headers) &&
    Array.isArray(m.parts)
  );
}

export function isRecordsStreamed(message: unknown): message is RecordsStreamed {
  const m = message as Partial<RecordsStreamed> | null;
  return typeof m === "object" && m !== null && m.type === "records-streamed" && Number.isInteger(m.id);
}

export const toWire = (parts: readonly PortablePart[]): WirePart[] =>
  parts.map((part) => (Buffer.isBuffer(part) ? { base64: part.toString("base64") } : part));

export const fromWire = (parts: readonly WirePart[]): PortablePart[] =>
  parts.map((part) => ("base64" in part ? Buffer.from(part.base64, "base64") : part));
