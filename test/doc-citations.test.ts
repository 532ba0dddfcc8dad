// Every Markdown file the repository's code, tests, benchmarks and docs name is in the
// repository (issue 41: comments cited TITO.md, STYLE.md and FAMILIES.md, design notes that
// live outside it). A name resolves against the citing file's folder, the repository's root
// or docs/, as the citations are written ("docs/http.md", "benchmark.md#…", "README.md"); a
// URL is someone else's file and is left alone.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "uvu";
import * as assert from "uvu/assert";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
/** Build output, dependencies, benchmark output and caches: nothing in them is ours to cite from. */
const SKIPPED = new Set(["node_modules", "dist", ".git", "out", "__pycache__", ".pytest_cache"]);
const TEXT = /\.(ts|mts|js|mjs|md|py|sh|jinja)$/;

function textFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (SKIPPED.has(e.name)) return [];
    const path = join(dir, e.name);
    if (e.isDirectory()) return textFiles(path);
    return e.isFile() && TEXT.test(e.name) ? [path] : [];
  });
}

/** The .md names `text` (a file at `path`) cites that resolve to no file inside the repository. */
function unresolved(path: string, text: string): string[] {
  const out: string[] = [];
  for (const [token] of text.matchAll(/[^\s"'`()<>[\]{},;|]*\.md\b/g)) {
    if (token.includes("://")) continue;
    const name = token.replace(/^[^\w.]+/, "");
    if (!/^[\w./-]+\.md$/.test(name)) continue;
    const inRepo = [join(dirname(path), name), join(root, name), join(root, "docs", name)].some(
      (candidate) => candidate.startsWith(root + sep) && existsSync(candidate),
    );
    if (!inRepo) out.push(name);
  }
  return out;
}

const self = fileURLToPath(import.meta.url);
/** Every text file but this one, whose made-up names are the check's own test cases. */
const files = textFiles(root).filter((f) => f !== self);

test("every Markdown file the repository cites is in it", () => {
  const missing = files.flatMap((f) =>
    unresolved(f, readFileSync(f, "utf8")).map((name) => `${relative(root, f).split(sep).join("/")}: ${name}`),
  );
  assert.equal(missing, [], `cited but not in the repository:\n${missing.join("\n")}`);
});

test("the check reads the tree, and reports a name outside it", () => {
  const read = files.map((f) => relative(root, f).split(sep).join("/"));
  for (const known of ["README.md", "docs/http.md", "sessions/session-core.ts", "test/architecture.test.ts"])
    assert.ok(read.includes(known), `${known} is read`);
  const here = join(root, "sessions", "x.ts");
  assert.equal(
    unresolved(here, "// see FAMILIES.md §6, ../shared/design/TITO.md and docs/nope.md; docs/http.md and README.md"),
    ["FAMILIES.md", "../shared/design/TITO.md", "docs/nope.md"],
  );
  assert.equal(unresolved(join(root, "docs", "x.md"), "[a](benchmark.md#latest-numbers), see https://x.org/a.md"), []);
});

test.run();
