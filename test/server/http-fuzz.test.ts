// Fuzzing the HTTP front door (fast-check), through the router and workers of the in-process tree: random
// JSON shapes for chat bodies (messages, tools, kwargs), random bodies, queries and
// headers on every route of docs/http.md, the admin routes included. Never a 5xx; an
// error is a 4xx (HEAD aside) with a JSON `{"error": "…"}`; the session under fire is
// unchanged after every case. Three targets: every route; chat on a session with two
// turns (whose history no random request can match, so every one must be refused); and
// the first turn of a fresh session, which renders whatever came (a 200 is fine there; a
// refusal leaves it empty). Run counts are printed.
import { test } from "uvu";
import * as assert from "uvu/assert";
import fc from "fast-check";
import { request } from "undici";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { WEATHER_TOOL } from "../helpers/server.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

const RUNS = { routes: 400, twoTurnChat: 200, firstTurn: 120 };
const TOKEN = "fuzz-admin-token";
const BODY_LIMIT = 64 * 1024;
let engine: SimEngine;
let server: InProcessTree;
let S = ""; // two committed turns
let baseline = "";

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: sharedFolder() });
  server = await startTree({
    engineUrl: engine.url,
    workers: 2,
    allowedAppendRoles: ["tool", "user"],
    authToken: TOKEN,
    bodyLimit: BODY_LIMIT,
    logLevel: "fatal",
  });
  S = (await server.createSession()).sessionId;
  const messages: unknown[] = [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Weather in Paris?" },
  ];
  for (let k = 0; k < 2; k++) {
    const res = await send(
      "POST",
      `/sessions/${S}/v1/chat/completions`,
      {},
      JSON.stringify({ messages, tools: [WEATHER_TOOL] }),
    );
    assert.is(res.status, 200, res.text);
    const message = JSON.parse(res.text).choices[0].message;
    messages.push(message, { role: "tool", tool_call_id: message.tool_calls?.[0]?.id ?? "x", content: "sunny" });
  }
  baseline = await sessionBody(S);
  assert.is(JSON.parse(baseline).records.length, 2);
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

const METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"] as const;

async function send(method: string, path: string, headers: Record<string, string>, body?: string) {
  const res = await request(server.url + path, {
    method: method as "GET",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", ...headers },
    body: method === "GET" || method === "HEAD" ? undefined : body,
    headersTimeout: 15_000,
    bodyTimeout: 15_000,
  });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

const sessionBody = async (id: string) => (await send("GET", `/sessions/${id}`, {})).text;

/** Never a 5xx; an error has a JSON body with a string `error` (HEAD has no body). */
function checkAnswer(method: string, path: string, res: { status: number; headers: unknown; text: string }) {
  const what = `${method} ${path} -> ${res.status} ${res.text.slice(0, 300)}`;
  assert.ok(res.status < 500, what);
  if (res.status < 400 || method === "HEAD") return;
  let body: unknown;
  try {
    body = JSON.parse(res.text);
  } catch {
    assert.unreachable(`not JSON: ${what}`);
  }
  assert.type((body as { error?: unknown }).error, "string", what);
}

// ---- generators ----
const text = fc.string({ maxLength: 24 });
const anyJson = fc.jsonValue({ maxDepth: 3 });
const printable = fc.string({
  unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
  maxLength: 40,
});
const FORBIDDEN = new Set([
  "host",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "upgrade",
  "expect",
  "content-length",
  "te",
  "trailer",
]);
const headerName = fc.oneof(
  fc.constantFrom(
    "authorization",
    "content-type",
    "accept",
    "content-encoding",
    "x-tito-instance",
    "x-request-id",
    "cookie",
    "origin",
  ),
  fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/).filter((n) => !FORBIDDEN.has(n) && !n.startsWith("proxy-")),
);
const headerValue = fc.oneof(
  printable,
  fc.constantFrom(
    "Bearer ",
    `Bearer ${TOKEN}x`,
    "Bearer tst_AAAA",
    "text/plain",
    "application/json; charset=utf-16",
    "gzip",
    "br",
    "multipart/form-data; boundary=x",
    "",
  ),
);
const headersArb = fc.dictionary(headerName, headerValue, { maxKeys: 4 });

const toolCall = fc.oneof(
  anyJson,
  fc.record(
    {
      id: text,
      type: fc.constantFrom("function", "x"),
      function: fc.record({ name: text, arguments: fc.oneof(text, anyJson) }, { requiredKeys: [] }),
    },
    { requiredKeys: [] },
  ),
);
// Mostly well-formed, so that cases get past the body checks into rollback and rendering.
const message = fc.oneof(
  { weight: 1, arbitrary: anyJson },
  {
    weight: 8,
    arbitrary: fc.record(
      {
        role: fc.oneof(
          { weight: 8, arbitrary: fc.constantFrom("system", "user", "assistant", "tool", "developer", "function") },
          { weight: 1, arbitrary: text },
          { weight: 1, arbitrary: anyJson },
        ),
        content: fc.oneof(
          text,
          fc.constant(null),
          anyJson,
          fc.array(
            fc.record(
              { type: fc.constantFrom("text", "image_url", "x"), text: fc.oneof(text, anyJson) },
              { requiredKeys: [] },
            ),
            { maxLength: 3 },
          ),
        ),
        tool_calls: fc.oneof(fc.array(toolCall, { maxLength: 3 }), anyJson),
        tool_call_id: fc.oneof(text, anyJson),
        name: text,
        reasoning_content: fc.oneof(text, anyJson),
      },
      { requiredKeys: ["role"] },
    ),
  },
);
const tool = fc.oneof(
  anyJson,
  fc.record(
    {
      type: fc.constantFrom("function", "x"),
      function: fc.record({ name: text, description: text, parameters: anyJson }, { requiredKeys: [] }),
    },
    { requiredKeys: [] },
  ),
);
const chatBody = fc.oneof(
  { weight: 1, arbitrary: anyJson.map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: printable }, // mostly not JSON at all
  {
    weight: 6,
    arbitrary: fc
      .record(
        {
          model: fc.oneof(text, anyJson),
          messages: fc.oneof(
            { weight: 4, arbitrary: fc.array(message, { minLength: 1, maxLength: 5 }) },
            { weight: 1, arbitrary: anyJson },
          ),
          tools: fc.oneof(fc.array(tool, { maxLength: 3 }), anyJson),
          chat_template_kwargs: fc.oneof(fc.dictionary(text, anyJson, { maxKeys: 3 }), anyJson),
          // Passed to the engine, whose non-200 answer passes through (http.md); the simulated
          // engine answers max_tokens 0 (or [false], coerced to 0) with a 500 of its own.
          max_tokens: fc.integer({ min: 1, max: 40 }),
        },
        { requiredKeys: ["messages"] },
      )
      .map((b) => JSON.stringify(b)),
  },
);

/** A path segment: a random (encoded) string, a random 32-hex id, or raw oddities. */
const segment = fc.oneof(
  text.map(encodeURIComponent),
  fc.stringMatching(/^[0-9a-f]{32}$/),
  fc.constantFrom("..", ".", "%2e%2e", "%zz", "%", "a".repeat(300), "v1", "health"),
);
const query = fc
  .option(
    fc.dictionary(
      fc.constantFrom("since", "after", "limit", "format", "max_seq_len", "x"),
      printable.map(encodeURIComponent),
      { maxKeys: 3 },
    ),
    { nil: undefined },
  )
  .map((q) =>
    q === undefined
      ? ""
      : `?${Object.entries(q)
          .map(([k, v]) => `${k}=${v}`)
          .join("&")}`,
  );

/** A route of docs/http.md with a random method and query; S only where nothing can change it. */
const routeArb = fc
  .tuple(
    fc.constantFrom(...METHODS),
    fc.constantFrom(
      "/health",
      "/metrics",
      "/supervision",
      "/supervision/events",
      "/sessions",
      "/sessions/{id}",
      "/sessions/{id}/v1/chat/completions",
      "/sessions/{id}/samples",
      "/sessions/{id}/{path}",
      "/{path}",
      "/admin/pause",
      "/admin/resume",
      "/admin/rollout",
    ),
    fc.boolean(),
    segment,
    fc.array(segment, { minLength: 1, maxLength: 3 }),
    query,
  )
  .map(([method, template, useS, id, path, q]) => {
    const mutates = method === "DELETE" || method === "PUT";
    const sid = useS && !mutates ? S : id;
    return { method, path: template.replace("{id}", sid).replace("{path}", path.join("/")) + q };
  });
const bodyArb = fc.oneof(chatBody, fc.constant("x".repeat(BODY_LIMIT + 1)), fc.constant(""));

test(`every route: random methods, bodies, queries and headers (${RUNS.routes} cases)`, async () => {
  await fc.assert(
    fc.asyncProperty(routeArb, bodyArb, headersArb, async (route, body, headers) => {
      const res = await send(route.method, route.path, headers, body);
      checkAnswer(route.method, route.path, res);
      // A body that paused the rollout door: open it again, or later turns would wait at it.
      if (route.path.startsWith("/admin/pause") && res.status === 200)
        assert.is((await send("POST", "/admin/resume", {}, '{"weight_version":"fuzz"}')).status, 200);
      assert.is(await sessionBody(S), baseline, `the session is unchanged after ${route.method} ${route.path}`);
    }),
    { numRuns: RUNS.routes },
  );
});

test(`chat on a session with two turns: every random body refused with a 4xx (${RUNS.twoTurnChat} cases)`, async () => {
  const path = `/sessions/${S}/v1/chat/completions`;
  await fc.assert(
    fc.asyncProperty(chatBody, async (body) => {
      const res = await send("POST", path, {}, body);
      checkAnswer("POST", path, res);
      assert.ok(res.status >= 400, `refused: ${res.status} ${res.text.slice(0, 200)}`);
      assert.is(await sessionBody(S), baseline, "the session is unchanged");
    }),
    { numRuns: RUNS.twoTurnChat },
  );
});

test(`first turn on a fresh session: a 200 or a 4xx that leaves it empty (${RUNS.firstTurn} cases)`, async () => {
  let fresh = (await server.createSession()).sessionId;
  const empty = await sessionBody(fresh);
  let answered = 0;
  await fc.assert(
    fc.asyncProperty(chatBody, async (body) => {
      const path = `/sessions/${fresh}/v1/chat/completions`;
      const res = await send("POST", path, {}, body);
      checkAnswer("POST", path, res);
      if (res.status === 200) {
        answered++;
        fresh = (await server.createSession()).sessionId; // this one has a turn now
        return;
      }
      assert.is(
        await sessionBody(fresh),
        empty.replace(/"session_id":"[0-9a-f]+"/, `"session_id":"${fresh}"`),
        "still empty",
      );
    }),
    { numRuns: RUNS.firstTurn },
  );
  console.log(
    `http fuzz: every route ${RUNS.routes}, two-turn chat ${RUNS.twoTurnChat}, first turn ${RUNS.firstTurn} cases (${answered} of them valid enough for a 200)`,
  );
});

test.run();
