// Every error code of the actors and server layers is documented in docs/errors.md.
import { readFileSync } from "node:fs";
import { test } from "uvu";
import * as assert from "uvu/assert";

const doc = readFileSync(new URL("../../docs/errors.md", import.meta.url), "utf8");

const files: [file: string, atLeast: number][] = [
  ["actors/errors.ts", 3],
  ["server/host/errors.ts", 3],
  ["server/router/errors.ts", 3],
  ["server/worker/errors.ts", 1],
];
for (const [file, atLeast] of files) {
  test(`every code in ${file} is in docs/errors.md`, () => {
    const source = readFileSync(new URL(`../../${file}`, import.meta.url), "utf8");
    const codes = [...source.matchAll(/"(TITO_ERR_[A-Z_]+)"/g)].map((m) => m[1]);
    assert.ok(codes.length >= atLeast, `found codes in ${file}`);
    for (const code of codes) assert.ok(doc.includes("`" + code + "`"), `${code} is documented`);
  });
}

test.run();
