// Every session error code is documented in docs/errors.md with the status
// and class a constructed error carries, and no code is used by two classes.
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

/** Every exported error class, constructed with placeholder arguments: only name, code and status matter here. */
const classes = Object.entries(errors)
  .filter(([, value]) => typeof value === "function" && value.prototype instanceof errors.TitoError)
  .map(([name, value]) => ({
    name,
    instance: new (value as new (...a: unknown[]) => errors.TitoError)("x", "y", ["z"]),
  }));

test("every code in sessions/errors.ts is documented in docs/errors.md with its status and class", () => {
  assert.ok(codesInSource.length >= 10, "the scan finds the codes");
  for (const code of codesInSource) {
    const row = sessionsSection.split("\n").find((line) => line.startsWith(`| \`${code}\` |`));
    assert.ok(row, `${code} has a row in the sessions section of docs/errors.md`);
    const cls = classes.find((c) => c.instance.code === code);
    assert.ok(cls, `${code} is the code of an exported class`);
    assert.match(row!, `| ${cls!.instance.status} |`, `${code}'s documented status`);
    assert.ok(row!.includes(`\`${cls!.name}\``), `${code}'s row names its class ${cls!.name}`);
  }
});

test("each class carries its own code, none reused, and every code in the source is one of them", () => {
  const seen = new Map<string, string>();
  for (const { name, instance } of classes) {
    assert.is(instance.name, name);
    assert.ok(Number.isInteger(instance.status) && instance.status >= 400, `${name}: an HTTP error status`);
    assert.not.ok(seen.has(instance.code), `${instance.code} used by ${seen.get(instance.code)} and ${name}`);
    seen.set(instance.code, name);
  }
  assert.equal([...seen.keys()].sort(), [...codesInSource].sort());
});

test.run();
