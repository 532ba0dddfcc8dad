// The fast set's file selection (test/fast-set.ts): by what a file does, not by the words
// in its comments or the modules it only takes types from.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { codeOf, inFastSet, plan, startsTree, tokenizersOf } from "./fast-set.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const at = (path: string) => join(root, path);

// The calls below are split so this file's own code names no tree call (it starts none).
const SESSION_SERVER = "startSession" + "Server";
const CLI = "start" + "Cli";
const EXAMPLE = "examples/rollout" + ".ts";

test("codeOf drops comments and keeps strings, even ones that look like comments", () => {
  const code = codeOf(
    [
      `// ${SESSION_SERVER}(x) in a line comment`,
      `/** spawns ${EXAMPLE}, says a doc comment */`,
      'const url = "http://127.0.0.1/*not a comment*/";',
      `const quote = /"/; ${CLI}(1); // after a quote in a regex`,
    ].join("\n"),
  );
  assert.not.ok(code.includes(SESSION_SERVER));
  assert.not.ok(code.includes(EXAMPLE));
  assert.ok(code.includes('"http://127.0.0.1/*not a comment*/"'));
  assert.ok(code.includes(`${CLI}(1);`));
  assert.not.ok(code.includes("after a quote"));
});

test("a helper that names a tree in comments and takes types from index.ts starts none", () => {
  // test/helpers/bodies.ts: `import type … from "../../index.ts"` and a comment naming
  // examples/rollout.ts; neither runs anything.
  assert.not.ok(startsTree(at("test/helpers/bodies.ts"), root));
  assert.ok(inFastSet(at("test/sessions/session-core.test.ts"), root));
  // The in-process tree is not a process tree.
  assert.ok(inFastSet(at("test/server/routes.test.ts"), root));
});

test("this file is in the fast set: the calls it tests on are not calls it makes", () => {
  assert.ok(inFastSet(at("test/fast-set.test.ts"), root));
});

test("files that spawn the CLI or a session server are out of the fast set", () => {
  assert.ok(startsTree(at("test/server/cli.test.ts"), root));
  assert.ok(startsTree(at("test/server/supervision.test.ts"), root));
  // A supervision tree of fixture children is a process tree too.
  assert.ok(startsTree(at("test/actors/supervision-tree.test.ts"), root));
  assert.not.ok(inFastSet(at("test/server/durability.test.ts"), root));
  // Heavy though treeless.
  assert.not.ok(inFastSet(at("test/server/http-fuzz.test.ts"), root));
});

test("the run's plan: fast-set files in batches, every process-tree or heavy file alone, costliest first", () => {
  const fast = ["test/fast-set.test.ts", "test/server/routes.test.ts", "test/sessions/session-core.test.ts"];
  const alone = ["test/server/cli.test.ts", "test/server/durability.test.ts", "test/server/http-fuzz.test.ts"];
  const costs: Record<string, number> = {
    "test/fast-set.test.ts": 1,
    "test/server/routes.test.ts": 5,
    "test/sessions/session-core.test.ts": 3,
    "test/server/cli.test.ts": 30,
    "test/server/durability.test.ts": 2,
    "test/server/http-fuzz.test.ts": 3.5,
  };
  const cost = (file: string) => costs[file.slice(root.length + 1)]!;
  const files = [...fast, ...alone].map(at);
  const units = plan(files, root, 2, cost).map((unit) => unit.map((f) => f.slice(root.length + 1)));
  // Batches of about equal cost (5 | 3 + 1), each file once; the others alone; by cost, 30 first.
  assert.equal(units, [
    ["test/server/cli.test.ts"],
    ["test/server/routes.test.ts"],
    ["test/sessions/session-core.test.ts", "test/fast-set.test.ts"],
    ["test/server/http-fuzz.test.ts"],
    ["test/server/durability.test.ts"],
  ]);
  // --isolated (no batches): every file alone.
  assert.equal(
    plan(files, root, 0, cost).map((unit) => unit.length),
    files.map(() => 1),
  );
});

test("files that load the same npm tokenizer share a batch, while their group fits a batch's share", () => {
  assert.equal(tokenizersOf(at("test/sessions/families/gemma3.test.ts")), ["gemma3"]);
  assert.equal(tokenizersOf(at("test/sessions/families/deepseekv32.test.ts")), ["deepseek_v3"]);
  assert.equal(tokenizersOf(at("test/buffers/crc32.test.ts")), []);
  const files = [
    "test/sessions/families/gemma3.test.ts",
    "test/server/sim-engine-families.test.ts", // Llama 3.1 and Gemma 3
    "test/sessions/families/llama3.test.ts",
    "test/buffers/crc32.test.ts",
    "test/server/routes.test.ts",
    "test/sessions/session-core.test.ts",
  ].map(at);
  const together = (units: string[][]) =>
    units.find((u) => u.includes(files[0]!))!.includes(files[1]!) &&
    units.find((u) => u.includes(files[1]!))!.includes(files[2]!);
  // Each costs the same: by cost alone they would be dealt one to a batch.
  assert.ok(together(plan(files, root, 2, () => 1)));
  assert.equal(
    plan(files, root, 2, () => 1).map((u) => u.length),
    [3, 3],
  );
  // A group over a batch's share (3 of 6 in 2 batches) is dealt file by file.
  assert.not.ok(together(plan(files, root, 3, () => 1)));
});

// A batch shares each folder its files load through test/sessions/fixtures.ts (folderAt,
// qwen3, npmFolder); a file that loads an npm folder itself pays ~1-3 CPU s more per batch
// (nine did: issue 41's test:fast went from 113.6 to ~89 CPU s once they shared).
test("test files load the npm tokenizer folders through the fixtures' per-process cache", () => {
  const direct = /\bloadTokenizerFolder\(\s*(bundledQwen3Dir|npmTokenizerDir|deepseekV3NpmDir)\(/;
  const offenders = readdirSync(at("test"), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .map((e) => relative(root, join(e.parentPath, e.name)))
    .filter((file) => file !== "test/sessions/fixtures.ts" && file !== "test/fast-set.test.ts")
    .filter((file) => direct.test(codeOf(readFileSync(at(file), "utf8"))));
  assert.equal(offenders, [], `load through folderAt / qwen3 / npmFolder: ${offenders.join(", ")}`);
  // The check sees a direct load (and not one in a comment).
  assert.ok(direct.test(codeOf("const q = loadTokenizerFolder(bundledQwen3Dir());")));
  assert.not.ok(direct.test(codeOf("// loadTokenizerFolder(bundledQwen3Dir())")));
});

test.run();
