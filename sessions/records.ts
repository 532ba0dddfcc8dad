// The record store (one record per committed turn) and the GET body builder. Records
// keep the request sent upstream and the engine's reply exactly as the bytes that
// crossed the wire; the GET body splices those bytes into the JSON as they are, as a
// list of chunks, so no record is ever re-parsed or re-serialized and no session body
// has to fit in one string.
import assert from "node:assert";

export interface TurnRecord {
  /** Unix seconds (float). */
  timestamp: number;
  method: string;
  path: string;
  statusCode: number;
  /** The JSON body sent upstream (with input_ids). */
  request: Buffer;
  /** The engine's full reply body, R3 payloads included, as the chunks it arrived in. */
  response: readonly Buffer[];
}

/** Where committed turns' records live. The memory store is one; a journal is another. */
export interface RecordStore {
  open(sessionId: string): void;
  append(sessionId: string, record: TurnRecord): void;
  /** Keeps the first `count` records (a rollback). */
  truncate(sessionId: string, count: number): void;
  list(sessionId: string): readonly TurnRecord[];
  drop(sessionId: string): void;
}

export class MemoryRecordStore implements RecordStore {
  readonly #bySession = new Map<string, TurnRecord[]>();

  open(sessionId: string): void {
    assert.ok(!this.#bySession.has(sessionId), `records of ${sessionId} opened twice`);
    this.#bySession.set(sessionId, []);
  }
  append(sessionId: string, record: TurnRecord): void {
    this.#records(sessionId).push(record);
  }
  truncate(sessionId: string, count: number): void {
    const records = this.#records(sessionId);
    if (records.length > count) records.length = count;
  }
  list(sessionId: string): readonly TurnRecord[] {
    return this.#records(sessionId);
  }
  drop(sessionId: string): void {
    this.#bySession.delete(sessionId);
  }
  #records(sessionId: string): TurnRecord[] {
    const records = this.#bySession.get(sessionId);
    assert.ok(records, `no records open for session ${sessionId}`);
    return records;
  }
}

/** The chunks of one record's JSON object; the request and response bytes are spliced in. */
export function recordChunks(record: TurnRecord): Buffer[] {
  const head =
    `{"timestamp":${JSON.stringify(record.timestamp)},"method":${JSON.stringify(record.method)},` +
    `"path":${JSON.stringify(record.path)},"status_code":${record.statusCode},"request":`;
  return [Buffer.from(head), record.request, Buffer.from(',"response":'), ...record.response, Buffer.from("}")];
}

/** `{"session_id":…,"records":[…],"metadata":{…}}` as chunks, in order. */
export function sessionBodyChunks(sessionId: string, records: readonly TurnRecord[], metadata: Record<string, unknown>): Buffer[] {
  const chunks: Buffer[] = [Buffer.from(`{"session_id":${JSON.stringify(sessionId)},"records":[`)];
  records.forEach((record, i) => {
    if (i > 0) chunks.push(Buffer.from(","));
    for (const c of recordChunks(record)) chunks.push(c);
  });
  chunks.push(Buffer.from(`],"metadata":${JSON.stringify(metadata)}}`));
  return chunks;
}
