// The structural JSON scanner knows bytes, not whose they are: bad JSON becomes the
// error its caller's `invalid` makes, told what is wrong and at which byte, with
// JSON.parse's own error as the cause when a slice does not parse.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { JsonScanner } from "../../buffers/json-scan.ts";

class CallersError extends Error {
  constructor(
    readonly detail: string,
    options?: { cause?: unknown },
  ) {
    super(`caller's: ${detail}`, options);
  }
}
const invalid = (detail: string, options?: { cause?: unknown }) => new CallersError(detail, options);

function thrown(fn: () => unknown): CallersError {
  try {
    fn();
  } catch (err) {
    assert.instance(err, CallersError);
    return err as CallersError;
  }
  throw new Error("expected a throw");
}

test("structural faults throw the caller's error, naming what and where", () => {
  const scan = new JsonScanner(Buffer.from('{"a":[1,2'), { invalid });
  assert.is(thrown(() => scan.skipValue(0)).detail, "expected ',' or ']' at byte 9");
  const unterminated = new JsonScanner([Buffer.from('{"a'), Buffer.from("bc")], { invalid });
  assert.is(thrown(() => unterminated.skipValue(0)).detail, "unterminated string at byte 1");
});

test("a slice JSON.parse rejects throws the caller's error with the parse error as cause", () => {
  const scan = new JsonScanner(Buffer.from('{"a":"\\x"}'), { invalid });
  const err = thrown(() => scan.parse(5, 9));
  assert.match(err.detail, / in bytes 5\.\.9$/);
  assert.instance(err.cause, SyntaxError);
});

test("valid JSON scans without calling invalid, across chunk boundaries", () => {
  const body = [Buffer.from('{"k":"v\\"'), Buffer.from('w","n":[1,{"x":null}],"t":true}')];
  const scan = new JsonScanner(body, {
    invalid: () => {
      throw new Error("invalid called on valid JSON");
    },
  });
  const keys: string[] = [];
  const end = scan.members(0, (m) => void keys.push(scan.parse(m.keyStart, m.keyEnd) as string));
  assert.is(end, scan.buf.length);
  assert.equal(keys, ["k", "n", "t"]);
});

test.run();
