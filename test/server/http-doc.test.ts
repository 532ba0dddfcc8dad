// Keeps the user docs true to the code, without starting a process: the router's
// registered routes vs docs/http.md's route index (both ways), the router's own error
// messages vs docs/http.md, the CLI's flags and --help text vs docs/operations.md, the
// embedding options and their defaults vs docs/embedding.md, the standalone simulated
// engine's flags and --help vs docs/engines.md, and the README's benchmark commands vs
// docs/benchmark.md and package.json.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { HELP } from "../../server/host/cli.ts";
import { defaultWorkers, resolveOptions } from "../../server/host/options.ts";
import { ENGINE_FLAGS, ENGINE_USAGE } from "../../server/sim-engine/engine-flags.ts";
import { buildRouterApp } from "../../server/router/router-app.ts";
import { ShardLinks } from "../../server/router/shard-links.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const read = (path: string) => readFileSync(join(root, path), "utf8");
const httpDoc = read("docs/http.md");
const opsDoc = read("docs/operations.md");
const embedDoc = read("docs/embedding.md");
const enginesDoc = read("docs/engines.md");

type RouteMap = Map<string, Set<string>>;

/** Parses Fastify's printRoutes({ commonPrefix: false }) tree into full path -> methods. */
function registeredRoutes(tree: string): RouteMap {
  const routes: RouteMap = new Map();
  const stack: string[] = [];
  for (const line of tree.split("\n")) {
    const m = /^(.*?)(?:├── |└── )(\S+)(?: \(([^)]*)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    stack.length = depth;
    stack.push(m[2]!);
    if (!m[3]) continue;
    // The tree prints a wildcard's "/" as an unprinted node of its own: put it back.
    const path = stack
      .join("")
      .replace(/([^/])\*$/, "$1/*")
      .replace(/:(\w+)/g, "{$1}")
      .replace(/\*$/, "{path…}");
    routes.set(path, new Set(m[3].split(",").map((s) => s.trim())));
  }
  return routes;
}

/** The "Route index" table of docs/http.md: | `path` | METHOD, METHOD |. */
function documentedRoutes(doc: string): RouteMap {
  const section = doc.split("## Route index")[1]?.split("\n## ")[0] ?? "";
  const routes: RouteMap = new Map();
  for (const m of section.matchAll(/^\| `([^`]+)` \| ([A-Z, ]+) \|$/gm)) {
    routes.set(m[1]!, new Set(m[2]!.split(",").map((s) => s.trim())));
  }
  return routes;
}

const sorted = (routes: RouteMap) =>
  [...routes].map(([path, methods]) => `${path} ${[...methods].sort().join(",")}`).sort();

/** A router app with no workers behind it: its routes, its hooks, its error handler. */
const bareRouterApp = () =>
  buildRouterApp({
    links: new ShardLinks(1, 0),
    status: { instanceId: "0".repeat(32), tree: null, events: [] },
    bodyLimit: 1024,
    logger: false,
  });

test("every route the router registers is in docs/http.md's route index, and nothing else", async () => {
  const app = bareRouterApp();
  try {
    await app.ready();
    const registered = registeredRoutes(app.printRoutes({ commonPrefix: false }));
    assert.ok(registered.size >= 8, `parsed too few routes from printRoutes: ${sorted(registered)}`);
    assert.ok(app.hasRoute({ method: "POST", url: "/sessions/:id/v1/chat/completions" }));
    assert.equal(sorted(documentedRoutes(httpDoc)), sorted(registered));
  } finally {
    await app.close();
  }
});

test("the router's routes declare no schemas: Fastify loads no schema compiler, and a schema added fails at startup", async () => {
  const app = bareRouterApp();
  app.get("/with-a-schema", { schema: { querystring: { type: "object" } } }, async () => ({}));
  try {
    await app.ready().then(
      () => assert.unreachable("a route schema was compiled"),
      (err: Error) => assert.match(err.message, /declare no schemas \(server\/router\/router-app\.ts\)/),
    );
  } finally {
    await app.close().catch(() => undefined);
  }
});

test("every error the router itself writes is in docs/http.md, message and code", () => {
  // Routes throw the router's coded errors and one handler writes them (error-reply.ts), so
  // their messages and codes are all in errors.ts (and the listing's own 503 message).
  const errors = read("server/router/errors.ts");
  const messages = new Set<string>();
  // super("TITO_ERR_…", status, "literal" | `prefix ${…}`)
  for (const m of errors.matchAll(/super\(\s*"TITO_ERR_[A-Z_]+",\s*\d+,\s*(?:"([^"]+)"|`([^`$]+))/g))
    messages.add((m[1] ?? m[2])!);
  for (const m of read("server/router/router-list.ts").matchAll(/const INCOMPLETE = "([^"]+)"/g)) messages.add(m[1]!);
  assert.ok(messages.size >= 10, `found too few router messages: ${[...messages]}`);
  for (const message of messages)
    assert.ok(httpDoc.includes(message), `docs/http.md lacks the router message ${JSON.stringify(message)}`);
  const codes = [...new Set([...errors.matchAll(/"(TITO_ERR_[A-Z_]+)"/g)].map((m) => m[1]!))];
  assert.ok(codes.length >= 15, "read the router's codes");
  for (const code of codes) assert.ok(httpDoc.includes(code), `docs/http.md lacks the router code ${code}`);
});

test("every CLI flag is in docs/operations.md, which quotes --help verbatim and names no other flag", () => {
  const cli = read("server/host/cli.ts");
  const block = /const FLAGS = \{([\s\S]*?)\} as const;/.exec(cli)?.[1] ?? "";
  const flags = [...block.matchAll(/^\s+"?([a-z][a-z-]*)"?: \{/gm)].map((m) => m[1]!);
  assert.ok(flags.length >= 15, `parsed too few flags from server/host/cli.ts: ${flags}`);
  for (const flag of flags) assert.ok(opsDoc.includes(`--${flag}`), `docs/operations.md lacks --${flag}`);
  assert.ok(opsDoc.includes(HELP), "docs/operations.md must quote `tito-server serve --help` exactly");
  // Flags the design mentions but the CLI does not have may be named only to say so.
  const absent = new Set(["data-dir", "durability"]);
  for (const m of opsDoc.matchAll(/--([a-z][a-z-]*[a-z])/g)) {
    assert.ok(
      flags.includes(m[1]!) || absent.has(m[1]!),
      `docs/operations.md names --${m[1]}, which server/host/cli.ts does not define`,
    );
  }
});

test("every startSessionServer option is in docs/embedding.md with its default", () => {
  const src = read("server/host/options.ts");
  const body = /export interface SessionServerOptions \{([\s\S]*?)\n\}/.exec(src)?.[1] ?? "";
  const keys = [...body.matchAll(/^\s+(\w+)\?:/gm)].map((m) => m[1]!);
  assert.ok(keys.length >= 20, `parsed too few options: ${keys}`);
  const defaults = resolveOptions({}, { port: 0 }) as unknown as Record<string, unknown>;
  for (const key of keys) {
    const row = new RegExp(`^\\| \`${key}\` \\|.*$`, "m").exec(embedDoc)?.[0];
    assert.ok(row, `docs/embedding.md has no options-table row for \`${key}\``);
    const value = defaults[key];
    if (key === "workers") {
      // The default depends on the machine: the row states the rule.
      assert.is(value, defaultWorkers());
      assert.ok(row.includes("available CPU cores, at most `8`"), `docs/embedding.md's workers row: ${row}`);
      continue;
    }
    if (value === undefined || typeof value === "function") continue;
    assert.ok(
      row.includes(JSON.stringify(value)),
      `docs/embedding.md's row for ${key} lacks its default ${JSON.stringify(value)}: ${row}`,
    );
  }
});

// The flags of `tito-server serve` that the simulated-engine section may name.
const SERVE_FLAGS_HERE = ["engine", "routing-replay", "tito-family", "sim-latency-ms", "sim-token-ms"];

test("the standalone simulated engine's flags and --help are in docs/engines.md, verbatim", () => {
  assert.ok(enginesDoc.includes(ENGINE_USAGE), "docs/engines.md must quote `npm run engine -- --help` exactly");
  const flags = Object.keys(ENGINE_FLAGS);
  assert.ok(flags.length >= 10, `too few engine flags: ${flags}`);
  for (const flag of flags) assert.ok(ENGINE_USAGE.includes(`--${flag}`), `the engine's --help lacks --${flag}`);
  // Outside the quoted --help, which names SGLang's own --incremental-streaming-output.
  const section = (enginesDoc.split("## The simulated engine")[1] ?? "").replace(ENGINE_USAGE, "");
  for (const m of section.matchAll(/--([a-z][a-z0-9-]*[a-z0-9])/g))
    assert.ok(
      flags.includes(m[1]!) || SERVE_FLAGS_HERE.includes(m[1]!),
      `docs/engines.md's simulated-engine section names --${m[1]}, which the engine does not define`,
    );
});

test("the README's benchmark commands are the guide's, and each is an npm script", () => {
  const readme = read("README.md");
  const guide = read("docs/benchmark.md");
  const scripts = Object.keys((JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts);
  const benchesIn = (text: string) => [
    ...new Set([...text.matchAll(/`npm run (bench(?::[a-z-]+)?|soak)[` ]/g)].map((m) => m[1]!)),
  ];
  const listed = benchesIn(readme).sort();
  const table = benchesIn(guide.split("\n## ")[0]!).sort();
  assert.ok(listed.length >= 9, `too few bench commands in the README: ${listed}`);
  assert.equal(listed, table, "README and docs/benchmark.md's table list the same benchmarks");
  assert.equal(
    scripts.filter((s) => /^(bench(:|$)|soak$)/.test(s)).sort(),
    table,
    "every bench script is in the guide, and nothing else",
  );
});

test.run();
