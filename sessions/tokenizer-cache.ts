// A disk cache of a BPE tokenizer's lookup tables, so that a process loading a tokenizer
// folder that was loaded before (a restarted worker, the next worker of the same server, the
// next run) skips the costly part of the load. Building the library's tables from
// tokenizer.json parses ~10 MB of JSON into ~450k small objects and turns them into maps
// (Qwen3: a whole folder load ~0.55 CPU s, and GC after it, about half a worker's start);
// with the tables from this cache the same load takes ~0.2 s.
//
// What is cached is the library's own result, never a reimplementation of it: after the
// library built a tokenizer from the folder, its model's token -> id map, id -> token array,
// merge ranks and unknown-token id are written as they are (in V8's serialization format,
// node:v8: its string arrays read back ~25% faster than the same arrays as JSON). A later
// load builds the tokenizer from tokenizer.json without its vocabulary and merges
// (everything else is built by the library as usual) and puts the cached tables in. The file is named by the SHA-256
// of tokenizer.json's bytes and of the library's BPE and Tokenizer classes' source, so an
// edited tokenizer or another library version never meets an old file; a file that does not
// read back whole and consistent is ignored and rebuilt. Only byte-pair-encoding models
// (type "BPE", every folder we ship for) are cached.
//
// Where: TITO_TOKENIZER_CACHE names the directory; "off" (or "") turns the cache off; unset,
// it is $XDG_CACHE_HOME/tito-server/tokenizers (~/.cache/...). The directory must belong to
// this user and not be writable by others (a planted file would change tokenization), else
// it is not used. Files are written to a temporary name and renamed, so concurrent writers
// (the workers of one server start together) never leave a torn file; at most
// MAX_CACHED_FILES files and MAX_CACHED_BYTES stay, the least recently used removed first
// (a read marks a file used: its modification time is set to now; only files named as the
// cache names them, never another file in the directory). Any failure to read or write only costs the time
// the cache would have saved: the load itself never fails because of the cache.
import { createHash } from "node:crypto";
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { homedir } from "node:os";
import { deserialize, serialize } from "node:v8";
import { dirname, join } from "node:path";
import * as tokenizers from "@huggingface/tokenizers";
import type { Tokenizer } from "@huggingface/tokenizers";

/**
 * Bumped whenever the file's layout changes (it is part of the file's name). 1: JSON text
 * (named .json); 2: the same fields in V8's serialization format (named .v8).
 */
const FORMAT = 2;
/**
 * Files kept in the directory: a tokenizer is one file of ~6-18 MB, a small synthetic one
 * (the tests') a few KB. A test run loads ~36 different ones; with 16 files it rebuilt its
 * biggest tokenizers every run.
 */
export const MAX_CACHED_FILES = 64;
/** Bytes kept in the directory (the count's 64 big tokenizers would be ~1 GB). */
export const MAX_CACHED_BYTES = 256 * 2 ** 20;

/** The library's BPE model fields the cache holds (not in the package's types). */
interface BpeTables {
  tokens_to_ids: Map<string, number>;
  vocab: (string | undefined)[];
  bpe_ranks: Map<string, number>;
  unk_token_id: number | undefined;
}

/**
 * The cache file's contents. A map's values are null when each is its entry's index (the
 * usual case: ids in vocabulary order, ranks in merge order). The vocabulary array is what
 * the map gives (vocab[id] = token, in the map's order) except at the listed indices.
 */
interface CacheFile {
  format: number;
  /** tokenizer.json without model.vocab and model.merges. */
  tokenizerJson: Record<string, unknown>;
  ids: { keys: string[]; values: number[] | null };
  vocab: { length: number; except: [number, string | null][] };
  ranks: { keys: string[]; values: number[] | null };
  unkTokenId: number | null;
}

type AnyClass = abstract new (...args: never[]) => unknown;
const classes = tokenizers as unknown as Record<string, AnyClass | undefined>;
const BPE = classes.BPE;

let fingerprint: string | undefined;
/** The library's BPE and Tokenizer classes as written: another library version is another key. */
function libraryFingerprint(): string {
  fingerprint ??= createHash("sha256").update(String(BPE)).update(String(classes.Tokenizer)).digest("hex");
  return fingerprint;
}

/** The cache directory from the environment (see the top of this file), or undefined for none. */
export function tokenizerCacheDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const set = env.TITO_TOKENIZER_CACHE;
  if (set !== undefined) return set === "" || set === "off" ? undefined : set;
  try {
    return join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "tito-server", "tokenizers");
  } catch {
    return undefined;
  }
}

/** Whether the directory exists (made if need be), belongs to this user and only it may write there. */
function usableDir(dir: string): boolean {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const stat = statSync(dir);
    const uid = process.getuid?.();
    return stat.isDirectory() && (uid === undefined || stat.uid === uid) && (stat.mode & 0o022) === 0;
  } catch {
    return false;
  }
}

/** The cache file for a tokenizer.json's bytes (its name only: see usableCacheFile). */
export function cacheFileFor(dir: string, tokenizerJsonBytes: Buffer): string {
  const key = createHash("sha256")
    .update(`tito-tokenizer-cache ${FORMAT} ${libraryFingerprint()} `)
    .update(tokenizerJsonBytes)
    .digest("hex");
  return join(dir, `${key.slice(0, 40)}.v8`);
}

/**
 * The cache file for a tokenizer.json's bytes in `dir`, or undefined when the directory cannot
 * be used (readCached and writeCached take it: a load hashes the bytes and checks the directory once).
 */
export function usableCacheFile(dir: string, tokenizerJsonBytes: Buffer): string | undefined {
  return usableDir(dir) ? cacheFileFor(dir, tokenizerJsonBytes) : undefined;
}

const tablesOf = (tokenizer: Tokenizer): BpeTables | undefined => {
  const model = (tokenizer as unknown as { model?: unknown }).model;
  return BPE && model instanceof BPE ? (model as unknown as BpeTables) : undefined;
};

/** Whether a parsed tokenizer.json is one the cache serves (a BPE model with a vocabulary and merges). */
export function cacheable(tokenizerJson: Record<string, unknown>): boolean {
  const model = tokenizerJson.model as { type?: unknown; vocab?: unknown; merges?: unknown } | undefined;
  return model?.type === "BPE" && typeof model.vocab === "object" && Array.isArray(model.merges);
}

/** tokenizer.json with an empty vocabulary and merge list: what a load from the cache builds from. */
function withoutTables(tokenizerJson: Record<string, unknown>): Record<string, unknown> {
  return { ...tokenizerJson, model: { ...(tokenizerJson.model as object), vocab: {}, merges: [] } };
}

const isStrings = (a: unknown): a is string[] => Array.isArray(a) && a.every((x) => typeof x === "string");
const isInts = (a: unknown): a is number[] => Array.isArray(a) && a.every((x) => Number.isInteger(x));
const isMap = (m: unknown): m is { keys: string[]; values: number[] | null } => {
  const { keys, values } = (m ?? {}) as { keys?: unknown; values?: unknown };
  return isStrings(keys) && (values === null || (isInts(values) && values.length === keys.length));
};
const isExceptions = (a: unknown): a is [number, string | null][] =>
  Array.isArray(a) &&
  a.every((e) => Array.isArray(e) && Number.isInteger(e[0]) && (e[1] === null || typeof e[1] === "string"));

/** The file's contents if they read back whole and consistent, else undefined. */
function readCacheFile(file: string): CacheFile | undefined {
  let parsed: Partial<CacheFile> | null;
  try {
    parsed = deserialize(readFileSync(file)) as Partial<CacheFile> | null;
  } catch {
    return undefined;
  }
  if (parsed === null || typeof parsed !== "object") return undefined;
  const { format, tokenizerJson, ids, vocab, ranks, unkTokenId } = parsed;
  const ok =
    format === FORMAT &&
    tokenizerJson !== null &&
    typeof tokenizerJson === "object" &&
    cacheable(tokenizerJson as Record<string, unknown>) &&
    isMap(ids) &&
    isMap(ranks) &&
    Number.isInteger(vocab?.length) &&
    isExceptions(vocab?.except) &&
    (unkTokenId === null || Number.isInteger(unkTokenId));
  return ok ? (parsed as CacheFile) : undefined;
}

/** A map from keys and values (null: each value is its key's index). */
function mapOf({ keys, values }: { keys: string[]; values: number[] | null }): Map<string, number> {
  const map = new Map<string, number>();
  for (let i = 0; i < keys.length; i++) map.set(keys[i]!, values ? values[i]! : i);
  return map;
}

/** The values, or null when each is its index. */
function valuesOf(map: Map<string, number>): number[] | null {
  const values = [...map.values()];
  return values.every((v, i) => v === i) ? null : values;
}

/** The vocabulary array the token -> id map implies: vocab[id] = token, in the map's order. */
function impliedVocab(ids: Map<string, number>, length: number): (string | undefined)[] {
  const vocab = new Array<string | undefined>(length);
  for (const [token, id] of ids) vocab[id] = token;
  return vocab;
}

/**
 * A tokenizer for the folder's tokenizer.json from the cache file, or undefined when there is
 * no usable file (the caller then builds it from tokenizer.json and calls writeCached).
 * `build` is the caller's own construction (same config, same error handling).
 */
export function readCached(
  file: string,
  build: (tokenizerJson: Record<string, unknown>) => Tokenizer,
): { tokenizer: Tokenizer; tokenizerJson: Record<string, unknown> } | undefined {
  const cached = readCacheFile(file);
  if (!cached) return undefined;
  markUsed(file);
  const tokenizer = build(cached.tokenizerJson);
  const tables = tablesOf(tokenizer);
  if (!tables) return undefined;
  // The library put the added tokens into its (empty) tables while building; the cached
  // tables hold them already, as the library left them after a full build.
  const ids = mapOf(cached.ids);
  const vocab = impliedVocab(ids, cached.vocab.length);
  for (const [index, token] of cached.vocab.except) vocab[index] = token ?? undefined;
  tables.tokens_to_ids = ids;
  tables.vocab = vocab;
  tables.bpe_ranks = mapOf(cached.ranks);
  tables.unk_token_id = cached.unkTokenId ?? undefined;
  return { tokenizer, tokenizerJson: cached.tokenizerJson };
}

/** Writes a tokenizer the library built from tokenizer.json to the cache (best effort: errors are ignored). */
export function writeCached(file: string, tokenizerJson: Record<string, unknown>, tokenizer: Tokenizer): void {
  const tables = tablesOf(tokenizer);
  if (!tables) return;
  const implied = impliedVocab(tables.tokens_to_ids, tables.vocab.length);
  const except: [number, string | null][] = [];
  for (let i = 0; i < tables.vocab.length; i++)
    if (tables.vocab[i] !== implied[i] || i in tables.vocab !== i in implied) except.push([i, tables.vocab[i] ?? null]);
  const contents: CacheFile = {
    format: FORMAT,
    tokenizerJson: withoutTables(tokenizerJson),
    ids: { keys: [...tables.tokens_to_ids.keys()], values: valuesOf(tables.tokens_to_ids) },
    vocab: { length: tables.vocab.length, except },
    ranks: { keys: [...tables.bpe_ranks.keys()], values: valuesOf(tables.bpe_ranks) },
    unkTokenId: tables.unk_token_id ?? null,
  };
  const temporary = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    writeFileSync(temporary, serialize(contents), { mode: 0o600 });
    renameSync(temporary, file);
    pruneCache(dirname(file));
  } catch {
    try {
      unlinkSync(temporary);
    } catch {
      // never written
    }
  }
}

/** A cache file's name (.json: format 1), and a temporary one's (the directory may hold other files: they are never touched). */
const CACHE_FILE = /^[0-9a-f]{40}\.(v8|json)$/;
const TEMPORARY_FILE = /^[0-9a-f]{40}\.(v8|json)\.\d+\.[0-9a-z]+\.tmp$/;

/**
 * Sets the file's modification time to now, so pruning (by that time) keeps the tokenizers
 * in use and drops one-off loads first: without it, a server's own tokenizer, read at every
 * start but written once, went before any file written later.
 */
function markUsed(file: string): void {
  try {
    const now = new Date();
    utimesSync(file, now, now);
  } catch {
    // read-only or removed meanwhile: it is only pruned sooner
  }
}

/**
 * Keeps the most recently used cache files, at most MAX_CACHED_FILES of them and
 * MAX_CACHED_BYTES in all (the newest is kept whatever its size), and removes temporary
 * files over a minute old.
 */
function pruneCache(dir: string): void {
  const now = Date.now();
  const files = readdirSync(dir)
    .filter((name) => CACHE_FILE.test(name) || TEMPORARY_FILE.test(name))
    .map((name) => {
      try {
        const stat = statSync(join(dir, name));
        return { name, mtime: stat.mtimeMs, size: stat.size };
      } catch {
        return undefined;
      }
    })
    .filter((f) => f !== undefined);
  const stale = files.filter((f) => TEMPORARY_FILE.test(f.name) && now - f.mtime > 60_000);
  const cached = files.filter((f) => CACHE_FILE.test(f.name)).sort((a, b) => b.mtime - a.mtime);
  let bytes = 0;
  const over = cached.filter((f, i) => {
    bytes += f.size;
    return i > 0 && (i >= MAX_CACHED_FILES || bytes > MAX_CACHED_BYTES);
  });
  for (const f of [...stale, ...over]) {
    try {
      unlinkSync(join(dir, f.name));
    } catch {
      // removed by another process
    }
  }
}
