// Every error code of the actors and server layers (and of the balancer's nginx config) is
// documented in docs/errors.md, and every code docs/errors.md lists is defined by some layer
// or by that config (no codes for features to come).
import { readFileSync } from "node:fs";
import { test } from "uvu";
import * as assert from "uvu/assert";

const doc = readFileSync(new URL("../../docs/errors.md", import.meta.url), "utf8");

const files: [file: string, atLeast: number][] = [
  ["actors/errors.ts", 3],
  ["server/host/errors.ts", 3],
  ["server/router/errors.ts", 3],
  ["server/worker/errors.ts", 1],
  ["deploy/nginx.conf.template", 2],
];
for (const [file, atLeast] of files) {
  test(`every code in ${file} is in docs/errors.md`, () => {
    const source = readFileSync(new URL(`../../${file}`, import.meta.url), "utf8");
    const codes = [...source.matchAll(/"(TITO_ERR_[A-Z_]+)"/g)].map((m) => m[1]);
    assert.ok(codes.length >= atLeast, `found codes in ${file}`);
    for (const code of codes) assert.ok(doc.includes("`" + code + "`"), `${code} is documented`);
  });
}

test("every code in docs/errors.md is defined in a layer's errors.ts", () => {
  const sources = [
    "transport/errors.ts",
    "sessions/errors.ts",
    "actors/errors.ts",
    "server/host/errors.ts",
    "server/router/errors.ts",
    "server/worker/errors.ts",
    "deploy/nginx.conf.template",
  ].map((file) => readFileSync(new URL(`../../${file}`, import.meta.url), "utf8"));
  const documented = [...new Set([...doc.matchAll(/`(TITO_ERR_[A-Z_]+)`/g)].map((m) => m[1]!))];
  assert.ok(documented.length >= 30, "found the documented codes");
  for (const code of documented)
    assert.ok(
      sources.some((source) => source.includes(`"${code}"`)),
      `${code} is documented but no layer defines it`,
    );
});

test.run();
