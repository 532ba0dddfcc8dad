import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as errors from "../../sessions/errors.ts";

const root = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url));
const source = readFileSync(root("sessions/errors.ts"), "utf8");
const docs = readFileSync(root("docs/errors.md"), "utf8");
const sessionsSection = docs.slice(
  docs.indexOf("## sessions"),
  docs.indexOf("\n## ", docs.indexOf("## sessions") + 1) >>> 0 || undefined,
);

const codesInSource = [...new Set([...source.matchAll(/"(TITO_ERR_[A-Z_]+)"/g)].map((m) => m[1]!))];

test("every code in sessions/errors.ts is documented in docs/errors.md with its status", () => {
  assert.ok(codesInSource.length >= 10, "the scan finds the codes");
  for (const code of codesInSource) {
    const row = sessionsSection.split("\n").find((line) => line.startsWith(`| \`${code}\` |`));
    assert.ok(row, `${code} has a row in the sessions section of docs/errors.md`);
    const status = errors.sessionErrorCodes[code];
    assert.ok(status, `${code} is in sessionErrorCodes`);
    assert.match(row!, `| ${status} |`, `${code}'s documented status`);
    const cls = Object.entries(errors).find(
      ([, v]) =>
        typeof v === "function" && source.includes(`class ${v.name} `) && new (v as any)("x", "y", ["z"]).code === code,
    )?.[0];
    assert.ok(cls && row!.includes(`\`${cls}\``), `${code}'s row names its class ${cls}`);
  }
});

test("the code table matches the classes and no code is reused", () => {
  const seen = new Map<string, string>();
  for (const [name, value] of Object.entries(errors)) {
    if (typeof value !== "function" || value === errors.TitoError || !(value.prototype instanceof errors.TitoError))
      continue;
    // Construct with placeholder arguments: only code and status matter here.
    const instance = new (value as new (...a: unknown[]) => errors.TitoError)("x", "y", ["z"]);
    assert.is(instance.name, name);
    assert.is(errors.sessionErrorCodes[instance.code], instance.status, `${name}: table status`);
    assert.not.ok(seen.has(instance.code), `${instance.code} used by ${seen.get(instance.code)} and ${name}`);
    seen.set(instance.code, name);
  }
  assert.equal([...seen.keys()].sort(), Object.keys(errors.sessionErrorCodes).sort());
});

test.run();
