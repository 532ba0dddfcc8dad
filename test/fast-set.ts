// Which test files `npm run test:fast` runs (test/run.ts --fast), and which `npm test` runs
// in batches (the others each in its own process): those that start no process tree, less
// a few heavy ones; and how test/run.ts deals them into batches (plan). A file starts a tree if its code (comments left
// out) or a module it loads calls what spawns one: by what the file does, not by the
// words in its comments or the modules it takes types from (test/helpers/bodies.ts takes
// types from index.ts, which once put every file using it out of the fast set).
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

/**
 * What starts a process tree: the embedding API, the CLI, npm, the example rollout program,
 * a supervision tree of child processes (actors/supervision-tree.ts).
 */
const TREE_CALL =
  /\b(startSessionServer|startCli|spawnCli|runCli|npmCommand)\(|\bnew SupervisionTree\(|examples\/rollout\.ts/;
/** An import of a test-local module that loads it; `import type` loads nothing and is left out. */
const LOCAL_IMPORT = /\bimport\s+(?!type\s)[^;"]*?\bfrom\s+"(\.{1,2}\/[^"]+)"/g;

/**
 * A string literal (kept: a spawned program's path is one) or a comment (dropped). A string
 * stays on one line, so a quote inside a regex literal cannot swallow the code after it.
 */
const STRING_OR_COMMENT = /("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`)|\/\/[^\n]*|\/\*[\s\S]*?\*\//g;

/** `text` with each comment replaced by a space. */
export const codeOf = (text: string): string =>
  text.replace(STRING_OR_COMMENT, (_comment, literal?: string) => literal ?? " ");

/**
 * Left out of --fast though they start no tree: the long fuzz, and every npm tokenizer
 * loaded (~300 MB each; the cross-check also runs Python's jinja2 and HF's Rust tokenizers;
 * the tokenizer cache's test loads each several times, with and without the cache).
 */
const NOT_FAST =
  /server\/(http-fuzz|families-http)\.test\.ts$|crosscheck\/crosscheck\.test\.ts$|sessions\/tokenizer-cache\.test\.ts$/;

/** Whether `file` (under `root`/test) or a test-local module it imports starts a process tree. */
export function startsTree(file: string, root: string, seen = new Set<string>()): boolean {
  if (seen.has(file)) return false;
  seen.add(file);
  if (file === join(root, "index.ts")) return true;
  // Test text may hold made-up import lines (the architecture test's): follow real files only.
  if (!file.startsWith(join(root, "test") + sep) || !existsSync(file)) return false;
  const code = codeOf(readFileSync(file, "utf8"));
  if (TREE_CALL.test(code)) return true;
  for (const [, spec] of code.matchAll(LOCAL_IMPORT)) {
    if (startsTree(resolve(dirname(file), spec!), root, seen)) return true;
  }
  return false;
}

/** Whether `npm run test:fast` runs `file`. */
export const inFastSet = (file: string, root: string): boolean =>
  !startsTree(file, root) && !NOT_FAST.test(relative(root, file).split(sep).join("/"));

/**
 * The npm tokenizers a file loads, besides the bundled Qwen3 one nearly every batch loads
 * (test/sessions/fixtures.ts: 0.7 to 3.4 CPU seconds each; test/helpers/deepseek-folder.ts
 * for DeepSeek's). By the names in its code: a hint for batching, where a miss costs a load.
 */
const NPM_TOKENIZER = /"(llama3_1|gemma3|deepseek_v3)"|\b(deepseekV3NpmDir)\(/g;

export function tokenizersOf(file: string): string[] {
  if (!existsSync(file)) return [];
  const names = [...codeOf(readFileSync(file, "utf8")).matchAll(NPM_TOKENIZER)].map(([, name, dir]) =>
    dir ? "deepseek_v3" : name!,
  );
  return [...new Set(names)];
}

/**
 * `files` dealt into `count` batches of about equal cost, costliest batch first: files that
 * load the same npm tokenizer go together (one load, not one per batch) while their group
 * costs no more than a batch's share; then the costliest file or group first, each to the
 * batch with the least so far.
 */
function batches(files: string[], count: number, cost: (file: string) => number): string[][] {
  const share = files.reduce((n, f) => n + cost(f), 0) / count;
  const groups: string[][] = [];
  const byTokenizer = new Map<string, string[]>();
  for (const file of files) {
    // The groups this file joins (by any tokenizer it shares), merged into one with it.
    const joined = [...new Set(tokenizersOf(file).flatMap((t) => (byTokenizer.has(t) ? [byTokenizer.get(t)!] : [])))];
    const group = [file, ...joined.flat()];
    if (group.reduce((n, f) => n + cost(f), 0) > share) {
      groups.push([file]);
      continue;
    }
    for (const old of joined) groups.splice(groups.indexOf(old), 1);
    groups.push(group);
    for (const f of group) for (const t of tokenizersOf(f)) byTokenizer.set(t, group);
  }
  const groupCost = (group: string[]) => group.reduce((n, f) => n + cost(f), 0);
  const bins = Array.from({ length: Math.min(count, files.length) }, () => ({ files: [] as string[], cost: 0 }));
  for (const group of groups.sort((a, b) => groupCost(b) - groupCost(a))) {
    const bin = bins.reduce((least, b) => (b.cost < least.cost ? b : least));
    bin.files.push(...group);
    bin.cost += groupCost(group);
  }
  return bins.sort((a, b) => b.cost - a.cost).map((b) => b.files.sort((x, y) => cost(y) - cost(x)));
}

/**
 * What test/run.ts runs, one process per entry, costliest first: the fast-set files among
 * `files` dealt into `count` batches (none: 0), every other file alone. A batch's cost is
 * guessed from its files' (isolated) costs.
 */
export function plan(files: string[], root: string, count: number, cost: (file: string) => number): string[][] {
  const batched = count ? files.filter((f) => inFastSet(f, root)) : [];
  const alone = files.filter((f) => !batched.includes(f)).map((f) => [f]);
  const unitCost = (unit: string[]) => unit.reduce((n, f) => n + cost(f), 0);
  return [...batches(batched, count, cost), ...alone].sort((a, b) => unitCost(b) - unitCost(a));
}
