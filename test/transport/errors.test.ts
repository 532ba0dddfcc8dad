// Every transport error code is documented in docs/errors.md, codes are
// unique, and each class rebuilds from the wire as itself with its code and status.

import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { transportErrorCodes, RemoteError } from "../../transport/index.ts";
import { errorFromWire, errorToWire } from "../../transport/error-codec.ts";

const doc = readFileSync(new URL("../../docs/errors.md", import.meta.url), "utf8");
const section = doc.slice(doc.indexOf("## transport"));

test("docs/errors.md has a transport section naming every transport code", () => {
  assert.ok(doc.includes("## transport"), "no ## transport section");
  const body = section.slice(0, section.indexOf("\n## ", 3) === -1 ? undefined : section.indexOf("\n## ", 3));
  for (const code of Object.keys(transportErrorCodes))
    assert.ok(body.includes(`\`${code}\``), `${code} is not documented`);
});

test("each class carries its own code, and a round trip over the wire keeps class, code and status", () => {
  const seen = new Set<string>();
  for (const [code, Cls] of Object.entries(transportErrorCodes)) {
    const err = new Cls("message here") as Error & { code: string; status: number };
    assert.is(err.code, code);
    assert.not.ok(seen.has(err.code), `${code} reused`);
    seen.add(err.code);
    const back = errorFromWire(errorToWire(err), transportErrorCodes) as Error & { code: string; status: number };
    assert.ok(back instanceof Cls, `${code} rebuilt as ${back.constructor.name}`);
    assert.equal([back.code, back.status, back.message], [code, err.status, "message here"]);
  }
  const unknown = errorFromWire({ code: "SOMEONE_ELSES", status: 409, message: "m" }, transportErrorCodes);
  assert.instance(unknown, RemoteError);
  assert.equal([(unknown as RemoteError).code, (unknown as RemoteError).status], ["SOMEONE_ELSES", 409]);
  assert.equal(errorToWire("a string"), { message: "a string" });
});

test.run();
