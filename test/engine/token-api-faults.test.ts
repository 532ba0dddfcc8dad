// Engine faults in every engine API, and the guard of the chat API: a canned local HTTP
// server stands in for the GPU engine. Each fault is a clear 502 (or the engine's own
// status passed through), nothing is recorded, and the session still takes the next turn.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { createServer, type Server } from "node:http";
import type { CoreResponse, SessionCore } from "../../sessions/index.ts";
import type { EngineApi } from "../../engine/index.ts";
import { coreFor } from "../helpers/core.ts";
import { qwen3 } from "../sessions/fixtures.ts";

const folder = qwen3();
const APIS: EngineApi[] = ["sglang-chat", "sglang-generate", "vllm-completions"];
interface Canned {
  status: number;
  body: (request: { input_ids?: number[]; prompt?: number[] }) => string;
  hang?: boolean;
}
let canned: Canned;
const MODEL_LIST = JSON.stringify({ object: "list", data: [{ id: "m", object: "model", max_model_len: 40960 }] });
let server: Server;
let url: string;
const seenPaths: string[] = [];

const text = "Hello there.";
const ids = [...folder.encode(text), folder.tokenId("<|im_end|>")!];
/** A well-formed reply of each API for a prompt of `n` ids. */
const goodReply: Record<EngineApi, (n: number) => string> = {
  "sglang-chat": (n) =>
    JSON.stringify({
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: text },
          finish_reason: "stop",
          meta_info: {
            output_token_logprobs: ids.map((id) => [-0.5, id]),
            completion_tokens: ids.length,
            prompt_tokens: n,
          },
        },
      ],
    }),
  "sglang-generate": (n) =>
    JSON.stringify({
      text,
      meta_info: {
        finish_reason: { type: "stop", matched: ids[ids.length - 1] },
        prompt_tokens: n,
        completion_tokens: ids.length,
        output_token_logprobs: ids.map((id) => [-0.5, id, null]),
      },
    }),
  "vllm-completions": () =>
    JSON.stringify({
      id: "cmpl-1",
      object: "text_completion",
      choices: [
        {
          index: 0,
          text,
          token_ids: ids,
          logprobs: { token_logprobs: ids.map(() => -0.5), tokens: ids.map((id) => `token_id:${id}`) },
          finish_reason: "stop",
        },
      ],
    }),
};
const promptOf = (r: { input_ids?: number[]; prompt?: number[] }) => (r.input_ids ?? r.prompt ?? []).length;

const chat = (core: SessionCore, id: string, content: string, history: unknown[] = []): Promise<CoreResponse> =>
  core.chat(id, {
    method: "POST",
    path: "/v1/chat/completions",
    query: "",
    headers: { "content-type": "application/json" },
    body: Buffer.from(JSON.stringify({ model: "m", messages: [...history, { role: "user", content }] })),
  });
const json = (r: CoreResponse) =>
  JSON.parse((Array.isArray(r.body) ? Buffer.concat(r.body) : (r.body as Buffer)).toString()) as {
    error?: string;
    choices?: { message: Record<string, unknown> }[];
  };
const tokens = async (core: SessionCore, id: string) => {
  const body = json(await core.get(id)) as unknown as { metadata: { accumulated_token_ids: number[] } };
  return body.metadata.accumulated_token_ids;
};

test.before(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      // vllm-completions reads the served model and its context length first.
      if (req.url === "/v1/models") return void res.end(MODEL_LIST);
      seenPaths.push(req.url!);
      if (canned.hang) return;
      const request = JSON.parse(Buffer.concat(chunks).toString() || "{}") as { input_ids?: number[] };
      res.writeHead(canned.status, { "content-type": "application/json" });
      res.end(canned.body(request));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
test.after(() => new Promise<void>((r) => server.close(() => r())));

for (const api of APIS) {
  const faults: [string, Canned, number, RegExp][] = [
    ["an engine 5xx passes through", { status: 503, body: () => '{"error":"overloaded"}' }, 503, /overloaded/],
    ["garbage", { status: 200, body: () => "<html>oops" }, 502, /not valid JSON|JSON/],
    [
      "missing ids",
      {
        status: 200,
        body: (r) => {
          const good = JSON.parse(goodReply[api](promptOf(r)));
          if (api === "sglang-generate") delete good.meta_info.output_token_logprobs;
          else if (api === "vllm-completions") {
            delete good.choices[0].token_ids;
            delete good.choices[0].logprobs;
          } else delete good.choices[0].meta_info.output_token_logprobs;
          return JSON.stringify(good);
        },
      },
      502,
      /output_token_logprobs|token_ids/,
    ],
    [
      "a length mismatch",
      {
        status: 200,
        body: (r) => {
          const good = JSON.parse(goodReply[api](promptOf(r)));
          if (api === "sglang-generate") good.meta_info.completion_tokens += 1;
          else if (api === "vllm-completions") good.choices[0].logprobs.token_logprobs.push(-1);
          else good.choices[0].meta_info.completion_tokens += 1;
          return JSON.stringify(good);
        },
      },
      502,
      /length mismatch/,
    ],
  ];
  for (const [name, fault, status, message] of faults) {
    test(`${api}: ${name} is a ${status}, unrecorded, and the session goes on`, async () => {
      const core = coreFor({ engineUrl: url, engineApi: api, tokenizerFolder: folder });
      const id = (json(await core.create()) as unknown as { session_id: string }).session_id;
      canned = fault;
      const bad = await chat(core, id, "hi");
      assert.is(bad.status, status);
      assert.match(json(bad).error ?? JSON.stringify(json(bad)), message);
      assert.equal(await tokens(core, id), [], "nothing recorded");
      canned = { status: 200, body: (r) => goodReply[api](promptOf(r)) };
      const ok = await chat(core, id, "hi");
      assert.is(ok.status, 200);
      assert.is(json(ok).choices![0]!.message.content, text);
      const held = await tokens(core, id);
      assert.equal(held.slice(-ids.length), ids, "the engine's ids, stop token included");
      await core.close();
    });
  }

  test(`${api}: connection refused is a 502 engine unreachable; a silent engine a 502 engine timeout`, async () => {
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const dead = coreFor({ engineUrl: `http://127.0.0.1:${port}`, engineApi: api, tokenizerFolder: folder });
    const id = (json(await dead.create()) as unknown as { session_id: string }).session_id;
    const refused = await chat(dead, id, "hi");
    assert.is(refused.status, 502);
    assert.match(json(refused).error!, /engine unreachable/);
    await dead.close();

    const slow = coreFor({ engineUrl: url, engineApi: api, tokenizerFolder: folder, engineTimeoutMs: 150 });
    const sid = (json(await slow.create()) as unknown as { session_id: string }).session_id;
    canned = { status: 200, body: () => "", hang: true };
    const late = await chat(slow, sid, "hi");
    assert.is(late.status, 502);
    assert.match(json(late).error!, /engine timeout/);
    assert.equal(await tokens(slow, sid), []);
    await slow.close();
  });
}

test("sglang-chat: an engine that ignored input_ids (prompt_tokens differs) is a 502 that says so", async () => {
  const core = coreFor({ engineUrl: url, tokenizerFolder: folder });
  const id = (json(await core.create()) as unknown as { session_id: string }).session_id;
  canned = { status: 200, body: (r) => goodReply["sglang-chat"](promptOf(r) + 3) };
  const res = await chat(core, id, "hi");
  assert.is(res.status, 502);
  assert.match(json(res).error!, /ignored input_ids/);
  assert.match(json(res).error!, /--engine-api sglang-generate/);
  assert.equal(await tokens(core, id), []);
  await core.close();
});

test("the token-level APIs refuse what they cannot honour, naming the field", async () => {
  for (const api of ["sglang-generate", "vllm-completions"] as const) {
    const core = coreFor({ engineUrl: url, engineApi: api, tokenizerFolder: folder });
    const id = (json(await core.create()) as unknown as { session_id: string }).session_id;
    const before = seenPaths.length;
    for (const [field, value, words] of [
      ["n", 2, /`n` > 1/],
      ["top_logprobs", 3, /`top_logprobs`/],
      ["tool_choice", "required", /`tool_choice`/],
      ["response_format", { type: "xml" }, /`response_format.type`/],
    ] as const) {
      const res = await core.chat(id, {
        method: "POST",
        path: "/v1/chat/completions",
        query: "",
        headers: {},
        body: Buffer.from(JSON.stringify({ messages: [{ role: "user", content: "hi" }], [field]: value })),
      });
      assert.is(res.status, 400, `${api} ${field}`);
      assert.match(json(res).error!, words);
    }
    assert.is(seenPaths.length, before, "nothing reached the engine");
    await core.close();
  }
});

test.run();
