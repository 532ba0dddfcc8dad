// The pieces of Python-faithful rendering (issue 39) against Python itself (Debian's
// /usr/bin/python3, as the cross-check uses): float repr, str.strip/lstrip/rstrip/split,
// `tojson` as transformers defines it (json.dumps with ensure_ascii, indent, separators,
// sort_keys), and the lossless JSON reader against JSON.parse.
import { spawnSync } from "node:child_process";
import * as fc from "fast-check";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { compileTemplate, renderTemplate } from "../../sessions/jinja-python.ts";
import { parseJsonLossless, stringifyLossless } from "../../sessions/lossless-json.ts";
import { pyFloatRepr, pyLstrip, pyRstrip, pySplit, pyStrip } from "../../sessions/python-text.ts";
import { PYTHON } from "../crosscheck/engine-stack.ts";

/** Runs a Python program on a JSON input (stdin); returns its JSON output. */
function python<T>(program: string, input: unknown): T {
  const run = spawnSync(PYTHON, ["-c", program], { input: JSON.stringify(input), encoding: "utf8" });
  assert.is(run.status, 0, run.stderr);
  return JSON.parse(run.stdout) as T;
}

const bitsHex = (x: number) => {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  return Array.from(new Uint8Array(view.buffer), (b) => b.toString(16).padStart(2, "0")).join("");
};

test("pyFloatRepr is Python's repr(float) (and str), for random and edge doubles", () => {
  const edges = [
    0,
    -0,
    1,
    -1,
    30,
    0.1,
    1e-7,
    1e-5,
    1e-4,
    1e15,
    1e16,
    1e17,
    1e21,
    1e22,
    123456789012345680000,
    5e-324,
    1.7976931348623157e308,
    2.5,
    0.5e-10,
    Infinity,
    -Infinity,
    NaN,
  ];
  const doubles = [...edges, ...fc.sample(fc.double(), 3000)];
  const expected = python<string[]>(
    "import json,struct,sys; print(json.dumps([repr(struct.unpack('>d', bytes.fromhex(h))[0]) for h in json.load(sys.stdin)]))",
    doubles.map(bitsHex),
  );
  doubles.forEach((x, i) => assert.is(pyFloatRepr(x), expected[i], `repr of ${x}`));
});

const SPACE_CANDIDATES = [
  " ",
  "\t",
  "\n",
  "\x0b",
  "\x0c",
  "\r",
  "\x1c",
  "\x1d",
  "\x1e",
  "\x1f",
  "\x85",
  "\xa0",
  "\u1680",
  "\u2000",
  "\u200a",
  "\u200b",
  "\u2028",
  "\u2029",
  "\u202f",
  "\u205f",
  "\u3000",
  "\ufeff",
  "x",
  "é",
  "😀",
];

test("pyStrip/pyLstrip/pyRstrip/pySplit are Python's str methods, with and without chars/sep", () => {
  const strings = fc.sample(
    fc.array(fc.constantFrom(...SPACE_CANDIDATES), { maxLength: 12 }).map((a) => a.join("")),
    600,
  );
  const cases = strings.map((s, i) => [s, i % 3 === 0 ? null : i % 3 === 1 ? "x😀" : " \x85"] as const);
  const expected = python<Array<[string, string, string, string[], string[]]>>(
    "import json,sys\nout=[]\nfor s,c in json.load(sys.stdin):\n  out.append([s.strip(c), s.lstrip(c), s.rstrip(c), s.split(), s.split(None, 1)])\nprint(json.dumps(out))",
    cases,
  );
  cases.forEach(([s, chars], i) => {
    const [strip, lstrip, rstrip, split, split1] = expected[i]!;
    const label = JSON.stringify([s, chars]);
    assert.is(pyStrip(s, chars), strip, `strip ${label}`);
    assert.is(pyLstrip(s, chars), lstrip, `lstrip ${label}`);
    assert.is(pyRstrip(s, chars), rstrip, `rstrip ${label}`);
    assert.equal(pySplit(s), split, `split ${label}`);
    assert.equal(pySplit(s, null, 1), split1, `split(None, 1) ${label}`);
  });
  assert.equal(pySplit("a,b,,c", ",", 2), ["a", "b", ",c"]);
});

const TOJSON_FORMS = [
  "{{ v | tojson }}",
  "{{ v | tojson(indent=2) }}",
  "{{ v | tojson(indent=0) }}",
  "{{ v | tojson(sort_keys=true) }}",
  "{{ v | tojson(ensure_ascii=true) }}",
  "{{ v | tojson(separators=(',', ':')) }}",
  "{{ v | tojson(indent=4, separators=(', ', ': '), sort_keys=true) }}",
];

test("tojson writes what transformers' tojson (json.dumps) writes, on JSON read losslessly", () => {
  const texts = fc.sample(fc.json({ maxDepth: 3 }), 150);
  texts.push('{"z": 30.0, "10": 1e-07, "big": 12345678901234567890, "é": [-0.0, 1E+21, 2.50], "B": {}, "a": []}');
  const expected = python<string[][]>(
    "import json,sys\nfrom jinja2.sandbox import ImmutableSandboxedEnvironment as E\n" +
      "env=E(trim_blocks=True, lstrip_blocks=True)\n" +
      "env.filters['tojson']=lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)\n" +
      "forms, texts = json.load(sys.stdin)\n" +
      "print(json.dumps([[env.from_string(f).render(v=json.loads(t)) for f in forms] for t in texts]))",
    [TOJSON_FORMS, texts],
  );
  const compiled = TOJSON_FORMS.map(compileTemplate);
  texts.forEach((text, i) => {
    const value = parseJsonLossless(text);
    compiled.forEach((template, j) =>
      assert.is(renderTemplate(template, { v: value }), expected[i]![j], `${TOJSON_FORMS[j]} of ${text}`),
    );
  });
});

test("parseJsonLossless reads what JSON.parse reads, throws what it throws, and writes back what was read", () => {
  fc.assert(
    fc.property(fc.json(), (text) => {
      const value = parseJsonLossless(text);
      assert.equal(value, JSON.parse(text));
      assert.equal(JSON.parse(stringifyLossless(value)), JSON.parse(text));
    }),
    { numRuns: 500 },
  );
  // Texts with a float take the reader (not JSON.parse): its strings too must refuse what JSON.parse refuses.
  for (const bad of [
    '{"a": 1.0,}',
    "[1e-07",
    '{"a" 1}',
    '"\u0001"',
    "01.5",
    '[1.5, "a\u0001b"]',
    '[1.5, "abc',
    '[1.5, "a\\"]',
  ]) {
    let native: unknown;
    try {
      JSON.parse(bad);
    } catch (err) {
      native = (err as Error).message;
    }
    assert.throws(
      () => parseJsonLossless(bad),
      (err: Error) => err.message === native,
      bad,
    );
  }
  for (const good of ['[1.5, "a\\"b\\\\", "", "\\u00e9\\n", "plain \u00e9 text"]', '{"k": 2.0, "s": "x\\\\"}'])
    assert.equal(parseJsonLossless(good), JSON.parse(good), good);
  const read = parseJsonLossless('{"z": 1, "10": [30.0, 1e-07], "__proto__": {"x": 2.50}, "n": 12345678901234567890}');
  assert.is(stringifyLossless(read), '{"z":1,"10":[30.0,1e-07],"__proto__":{"x":2.50},"n":12345678901234567890}');
  assert.ok(Object.hasOwn(read as object, "__proto__"), "__proto__ is an own key, as JSON.parse makes it");
});

test.run();
