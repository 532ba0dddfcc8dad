// `npm run bench:engine-client`: the client CPU of receiving large engine replies over https,
// through the project's engine client (engine/http-client.ts over node:tls) and through an
// undici Pool (the https path the project had before), alternating in one process, with the
// replies served by a child process (its CPU is not counted). Plain http through the engine
// client is the floor. Prints client CPU ms per MiB received; writes bench/out/engine-client.json.
import { fork } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer as createHttps } from "node:https";
import { createServer as createHttp } from "node:http";
import { fileURLToPath } from "node:url";
import { Pool } from "undici";
import { EngineHttpAgent } from "../engine/http-client.ts";

const MIB = 1024 * 1024;
const REPLY_MIB = 16;
const REQUESTS = 8;
const ROUNDS = 3;
const fixture = (name: string) => readFileSync(new URL(`../test/fixtures/${name}`, import.meta.url));

if (process.argv[2] === "--serve") {
  const body = Buffer.alloc(REPLY_MIB * MIB, 0x61);
  const handler = (_req: unknown, res: import("node:http").ServerResponse) => {
    res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
    res.end(body);
  };
  const tls = createHttps({ key: fixture("tls-selfsigned.key"), cert: fixture("tls-selfsigned.crt") }, handler);
  const plain = createHttp(handler);
  tls.listen(0, "127.0.0.1", () =>
    plain.listen(0, "127.0.0.1", () =>
      process.send!({
        https: (tls.address() as { port: number }).port,
        http: (plain.address() as { port: number }).port,
      }),
    ),
  );
} else {
  const child = fork(fileURLToPath(import.meta.url), ["--serve"], { execArgv: ["--import", "tsx"] });
  const ports = await new Promise<{ https: number; http: number }>((r) => child.once("message", (m) => r(m as never)));
  const ca = fixture("tls-selfsigned.crt");
  const ours = new EngineHttpAgent(new URL(`https://127.0.0.1:${ports.https}`), { tls: { ca } });
  const plain = new EngineHttpAgent(new URL(`http://127.0.0.1:${ports.http}`));
  const pool = new Pool(`https://127.0.0.1:${ports.https}`, { connect: { ca } });
  const viaAgent = (agent: EngineHttpAgent) => async () => {
    const res = await agent.send({ method: "GET", path: "/", headers: {} });
    return res.body.reduce((n, b) => n + b.length, 0);
  };
  const viaUndici = () =>
    new Promise<number>((resolve, reject) => {
      let bytes = 0;
      const chunks: Buffer[] = [];
      pool.dispatch(
        { method: "GET", path: "/", headers: {} },
        {
          onRequestStart() {},
          onResponseStart() {},
          onResponseData(_c, chunk) {
            chunks.push(chunk);
            bytes += chunk.length;
          },
          onResponseEnd() {
            resolve(bytes);
          },
          onResponseError(_c, err) {
            reject(err);
          },
        },
      );
    });
  const clients: [string, () => Promise<number>][] = [
    ["engine client, https", viaAgent(ours)],
    ["undici Pool, https", viaUndici],
    ["engine client, http (floor)", viaAgent(plain)],
  ];
  const results: Record<string, number[]> = {};
  for (const [, run] of clients) for (let i = 0; i < 2; i++) await run(); // warm-up
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, run] of clients) {
      const start = process.cpuUsage();
      let bytes = 0;
      for (let i = 0; i < REQUESTS; i++) bytes += await run();
      const used = process.cpuUsage(start);
      (results[name] ??= []).push((used.user + used.system) / 1000 / (bytes / MIB));
    }
  }
  console.log(`| client | CPU ms per MiB received (${ROUNDS} rounds of ${REQUESTS} x ${REPLY_MIB} MiB) |`);
  console.log("|---|---|");
  for (const [name, values] of Object.entries(results))
    console.log(`| ${name} | ${values.map((v) => v.toFixed(3)).join(" · ")} |`);
  const out = fileURLToPath(new URL("./out/", import.meta.url));
  mkdirSync(out, { recursive: true });
  writeFileSync(
    `${out}engine-client.json`,
    JSON.stringify({ replyMiB: REPLY_MIB, requests: REQUESTS, results }, null, 2),
  );
  await Promise.all([ours.close(), plain.close(), pool.close()]);
  child.kill();
}
