// Reads the module references of a TypeScript source with the compiler's parser (so an
// import inside a comment or a string is not one) and checks them against the rules of
// test/architecture-rules.ts. Works on in-memory text, so a test can feed it a made-up file.
import { builtinModules } from "node:module";
import { posix } from "node:path";
import ts from "typescript";
import { LAYERS, MAX_LINES, PACKAGE_RULES, RULES, type Layer } from "../architecture-rules.ts";

/**
 * How a module is referenced: `static` is loaded with the file (import, export … from,
 * require, new URL(…, import.meta.url)); `type` is erased by the compiler; `dynamic` is an
 * `import()` that loads it only when the code runs.
 */
export type EdgeKind = "static" | "type" | "dynamic";

export interface ImportEdge {
  line: number;
  specifier: string;
  kind: EdgeKind;
}

export interface SourceText {
  /** Repository-relative, with "/" separators: "server/router/router-app.ts". */
  path: string;
  text: string;
}

export interface Violation {
  file: string;
  line: number;
  /** The imported file (repository path), the package name, or "lines" for the size rule. */
  target: string;
  rule: string;
  message: string;
}

/** An import that names only types (`import type`, or every specifier marked `type`) is erased. */
function importIsTypeOnly(node: ts.ImportDeclaration): boolean {
  const clause = node.importClause;
  if (!clause) return false; // `import "x"`: loaded for its side effects
  if (clause.isTypeOnly) return true;
  if (clause.name) return false;
  const bindings = clause.namedBindings;
  return (
    bindings !== undefined &&
    ts.isNamedImports(bindings) &&
    bindings.elements.length > 0 &&
    bindings.elements.every((e) => e.isTypeOnly)
  );
}

function exportIsTypeOnly(node: ts.ExportDeclaration): boolean {
  if (node.isTypeOnly) return true;
  const clause = node.exportClause;
  return (
    clause !== undefined &&
    ts.isNamedExports(clause) &&
    clause.elements.length > 0 &&
    clause.elements.every((e) => e.isTypeOnly)
  );
}

const isImportMetaUrl = (node: ts.Node | undefined): boolean =>
  node !== undefined &&
  ts.isPropertyAccessExpression(node) &&
  ts.isMetaProperty(node.expression) &&
  node.expression.keywordToken === ts.SyntaxKind.ImportKeyword &&
  node.name.text === "url";

/** `require(…)`, `require.resolve(…)` and `createRequire(…)(…)`. */
function isRequireCall(call: ts.CallExpression): boolean {
  const callee = call.expression;
  if (ts.isIdentifier(callee)) return callee.text === "require";
  if (ts.isPropertyAccessExpression(callee))
    return ts.isIdentifier(callee.expression) && callee.expression.text === "require" && callee.name.text === "resolve";
  return (
    ts.isCallExpression(callee) && ts.isIdentifier(callee.expression) && callee.expression.text === "createRequire"
  );
}

/**
 * Every module reference in `text`. A dynamic import or require whose specifier is not a
 * string literal cannot be checked: it comes back with specifier "" so the check reports it.
 */
export function readImports(path: string, text: string): ImportEdge[] {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const edges: ImportEdge[] = [];
  const add = (node: ts.Node, specifier: ts.Node | undefined, kind: EdgeKind) => {
    const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
    const literal = specifier !== undefined && ts.isStringLiteralLike(specifier) ? specifier.text : "";
    edges.push({ line, specifier: literal, kind });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) {
      add(node, node.moduleSpecifier, importIsTypeOnly(node) ? "type" : "static");
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier) {
      add(node, node.moduleSpecifier, exportIsTypeOnly(node) ? "type" : "static");
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      add(node, node.moduleReference.expression, node.isTypeOnly ? "type" : "static");
    } else if (ts.isImportTypeNode(node)) {
      const arg = node.argument;
      add(node, ts.isLiteralTypeNode(arg) ? arg.literal : undefined, "type");
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      add(node, node.arguments[0], "dynamic");
    } else if (ts.isCallExpression(node) && isRequireCall(node)) {
      add(node, node.arguments[0], "static");
    } else if (
      ts.isNewExpression(node) &&
      ts.isIdentifier(node.expression) &&
      node.expression.text === "URL" &&
      node.arguments?.length === 2 &&
      ts.isStringLiteralLike(node.arguments[0]!) &&
      isImportMetaUrl(node.arguments[1])
    ) {
      add(node, node.arguments[0], "static");
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return edges;
}

export function layerOf(path: string): Layer | undefined {
  return LAYERS.find((layer) => (layer.path.endsWith("/") ? path.startsWith(layer.path) : path === layer.path));
}

/** "@scope/name/sub/path" -> "@scope/name"; "name/sub" -> "name". */
export function packageName(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]!;
}

const builtins = new Set(builtinModules);
const isBuiltin = (specifier: string) => specifier.startsWith("node:") || builtins.has(specifier.split("/")[0]!);

const countLines = (text: string) => text.split("\n").length - (text.endsWith("\n") ? 1 : 0);

export interface CheckResult {
  violations: Violation[];
  /** Every module reference read, per file. */
  edges: Map<string, ImportEdge[]>;
  /** Every import cycle between files, each as the files in import order, the first repeated at the end. */
  cycles: string[][];
}

/** The repository path a relative specifier of `from` names, or undefined for a package or builtin. */
function targetOf(from: string, specifier: string): string | undefined {
  if (!specifier.startsWith(".") && !specifier.startsWith("/")) return undefined;
  return posix.normalize(posix.join(posix.dirname(from), specifier));
}

/**
 * The import cycles among `files`: one per strongly connected component of the import
 * graph (Tarjan's algorithm), printed as a shortest cycle through the component's first
 * file. Every kind of reference counts, type-only ones included: a type cycle is still two
 * files that cannot be understood one without the other.
 */
export function findCycles(edges: ReadonlyMap<string, readonly ImportEdge[]>): string[][] {
  const next = new Map<string, string[]>();
  for (const [from, list] of edges) {
    const targets = new Set<string>();
    for (const e of list) {
      const to = targetOf(from, e.specifier);
      if (to !== undefined && edges.has(to)) targets.add(to);
    }
    next.set(from, [...targets].sort());
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  let counter = 0;
  const connect = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v)!) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || next.get(v)!.includes(v)) components.push(component.sort());
  };
  for (const v of [...next.keys()].sort()) if (!index.has(v)) connect(v);
  return components.map((component) => shortestCycle(component[0]!, new Set(component), next));
}

/** A shortest path from `start` back to itself inside `members` (breadth first). */
function shortestCycle(start: string, members: ReadonlySet<string>, next: ReadonlyMap<string, string[]>): string[] {
  const from = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const v = queue[i]!;
    for (const w of next.get(v)!) {
      if (!members.has(w)) continue;
      if (w === start) {
        const path = [start];
        for (let u = v; u !== start; u = from.get(u)!) path.splice(1, 0, u);
        return [...path, start];
      }
      if (!from.has(w)) {
        from.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

/**
 * Checks `files` against the rules. `dependencies` are the package's runtime dependencies
 * (package.json "dependencies"): a source file may import no other package.
 */
export function checkArchitecture(files: readonly SourceText[], dependencies: ReadonlySet<string>): CheckResult {
  const violations: Violation[] = [];
  const edges = new Map<string, ImportEdge[]>();
  for (const { path, text } of files) {
    const report = (line: number, target: string, rule: string, why: string, what: string) =>
      violations.push({ file: path, line, target, rule, message: `${path}:${line} ${what} — ${why} [rule: ${rule}]` });
    const from = layerOf(path);
    const lines = countLines(text);
    if (lines > MAX_LINES) {
      report(1, "lines", "size", `no source file is over ${MAX_LINES} lines`, `has ${lines} lines`);
    }
    const fileEdges = readImports(path, text);
    edges.set(path, fileEdges);
    if (!from) {
      report(1, path, "layout", "every source file belongs to a layer of test/architecture-rules.ts", "is in no layer");
      continue;
    }
    const rule = RULES[from.name]!;
    for (const edge of fileEdges) {
      const { line, specifier, kind } = edge;
      if (specifier === "") {
        report(
          line,
          "?",
          "literal",
          "a module reference must be a string literal to be checked",
          `has a ${kind} import`,
        );
        continue;
      }
      if (specifier.startsWith(".") || specifier.startsWith("/")) {
        const target = posix.normalize(posix.join(posix.dirname(path), specifier));
        const to = layerOf(target);
        const what = `imports ${specifier} (${target}${kind === "static" ? "" : `, ${kind}`})`;
        if (!to) {
          report(line, target, "layout", "source files import only source files of the layers", what);
        } else if (
          to.name !== from.name &&
          !rule.uses.includes(to.name) &&
          !(kind === "type" && rule.types?.includes(to.name)) &&
          !(kind !== "static" && rule.onDemand?.includes(to.name))
        ) {
          report(line, target, from.name, rule.says, what);
        }
        continue;
      }
      if (isBuiltin(specifier)) continue;
      const name = packageName(specifier);
      if (!dependencies.has(name)) {
        report(
          line,
          name,
          "dependencies",
          'a source file imports only packages in package.json "dependencies"',
          `imports ${specifier}`,
        );
        continue;
      }
      const limited = PACKAGE_RULES.find((r) =>
        r.packages.some((p) => (p.endsWith("/") ? name.startsWith(p) : name === p)),
      );
      if (limited && !limited.layers.includes(from.name)) {
        report(line, name, `package ${name}`, limited.says, `imports ${specifier}`);
      }
    }
  }
  const cycles = findCycles(edges);
  for (const cycle of cycles) {
    const first = cycle[0]!;
    const line = edges.get(first)!.find((e) => targetOf(first, e.specifier) === cycle[1])?.line ?? 1;
    violations.push({
      file: first,
      line,
      target: "cycle",
      rule: "cycle",
      message: `${first}:${line} is in an import cycle: ${cycle.join(" -> ")} — no file imports itself through others, type-only imports included [rule: cycle]`,
    });
  }
  return { violations, edges, cycles };
}
