// The session layer's only public surface: the core operations a worker process calls,
// their value types, and the coded errors. Nothing here starts a server or a process.
export { createSessionCore, errorResponse, SessionCore } from "./session-core.ts";
export type { CoreRequest, CoreResponse, SessionCoreOptions, TurnContext } from "./session-core.ts";
export { asAnthropicError, DEFAULT_PING_MS, messagesTurn, type MessagesTurnOptions } from "./messages-turn.ts";
export * from "./errors.ts";
export { bundledQwen3Dir, loadTokenizerFolder, type TokenizerFolder } from "./tokenizer-folder.ts";
export { MemoryRecordStore, sessionBodyEnds, type RecordStore, type TurnRecord } from "./journal/records.ts";
export { JournalRecordStore, type JournalStoreOptions } from "./journal/journal-store.ts";
export { RecordStream, openRecordStream, type PortablePart, type PathRange } from "./journal/record-stream.ts";
export { reshardJournal, type ReshardOptions, type ReshardResult } from "./journal/journal-reshard.ts";
export type { FsyncPolicy } from "./journal/journal-segments.ts";
export type { Mismatch } from "./drift.ts";
export type { Engine, EngineTurn, EngineTurnRequest, EngineCompletion, EngineRefusal } from "./engine-port.ts";
export type { TrainingSample } from "./journal/sample-encode.ts";
export type { TitoFamilyName } from "./families/index.ts";
export type { MessageMatcher } from "./message-compare.ts";
