// Session affinity across engine replicas (docs/engines.md, "Several engine replicas"): a
// real nginx stands in for SGLang's model gateway, hashing each engine request on its
// X-SMG-Routing-Key header (`hash $http_x_smg_routing_key consistent`) over two simulated
// engines. One tito-server sends 16 sessions × 4 turns through it: every session's turns
// reach one engine (nginx's access log names the engine each request went to), both engines
// get sessions, and each session's later turns hit that engine's prefix cache.
// Needs the nginx binary (Debian: apt-get install nginx; .ci/run installs it); without it
// the test says so and skips.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer } from "../../index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { call, chat } from "../helpers/server.ts";

const nginxBin = ["/usr/sbin/nginx", "/usr/bin/nginx", "nginx"].find(
  (bin) => spawnSync(bin, ["-v"], { stdio: "ignore" }).status === 0,
);

const dir = mkdtempSync(join(tmpdir(), "tito-nginx-engines-"));
const prefix = join(dir, "nginx");
let engines: SimEngine[] = [];
let server: SessionServer | undefined;
let nginx: ChildProcess | undefined;
let gateway = "";

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const port = (probe.address() as { port: number }).port;
      probe.close(() => resolve(port));
    });
  });
}

async function waitFor(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const ok = await fetch(url)
      .then((r) => r.status === 200)
      .catch(() => false);
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} never answered 200`);
}

/** The gateway's configuration: SMG's consistent_hashing policy, as nginx writes it. */
const config = (port: number) => `
worker_processes 1;
error_log ${prefix}/error.log warn;
pid ${prefix}/nginx.pid;
daemon off;
events { worker_connections 256; }
http {
  client_body_temp_path ${prefix}/body;
  proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi;
  uwsgi_temp_path ${prefix}/uwsgi;
  scgi_temp_path ${prefix}/scgi;
  log_format routed '$http_x_smg_routing_key $upstream_addr $request_uri';
  access_log ${prefix}/access.log routed;
  upstream engines {
    hash $http_x_smg_routing_key consistent;
    ${engines.map((e) => `server ${new URL(e.url).host} max_fails=0;`).join("\n    ")}
    keepalive 16;
  }
  server {
    listen 127.0.0.1:${port};
    client_max_body_size 0;
    location / {
      proxy_pass http://engines;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`;

if (!nginxBin) {
  test("engine replicas behind nginx (skipped: no nginx binary; install it with `apt-get install nginx`)", () => {
    console.log("skipping test/server/nginx-engines.test.ts: nginx is not installed (apt-get install nginx)");
  });
} else {
  test.before(async () => {
    engines = await Promise.all([1, 2].map(() => startSimEngine({ prefixCache: true })));
    mkdirSync(prefix);
    chmodSync(prefix, 0o777); // nginx started as root runs its worker as nobody
    const port = await freePort();
    writeFileSync(join(prefix, "nginx.conf"), config(port));
    const check = spawnSync(nginxBin, ["-t", "-p", prefix, "-c", join(prefix, "nginx.conf")], { encoding: "utf8" });
    assert.is(check.status, 0, `nginx -t: ${check.stderr}`);
    nginx = spawn(nginxBin, ["-p", prefix, "-c", join(prefix, "nginx.conf")], { stdio: "ignore" });
    gateway = `http://127.0.0.1:${port}`;
    await waitFor(`${gateway}/health`);
    server = await startSessionServer({
      engineUrl: gateway,
      engineApi: "sglang-generate",
      workers: 2,
      port: 0,
      durability: "memory",
      logLevel: "warn",
      allowedAppendRoles: ["user"],
    });
  });

  test.after(async () => {
    await server?.shutdown();
    if (nginx?.pid && nginx.exitCode === null && nginx.signalCode === null) {
      const exited = new Promise((r) => nginx!.once("exit", r));
      nginx.kill("SIGTERM");
      await exited;
    }
    await Promise.all(engines.map((e) => e.close()));
    rmSync(dir, { recursive: true, force: true });
  });

  test("16 sessions × 4 turns: each session's turns reach one engine, both engines get sessions", async () => {
    const ids = Array.from({ length: 16 }, (_, i) => `agent-${i}`);
    const before = engines.map((e) => e.requests);
    await Promise.all(
      ids.map(async (id) => {
        assert.is((await call(server!.url, "PUT", `/sessions/${id}`)).status, 201);
        const messages: unknown[] = [{ role: "user", content: `Agent ${id}: list three rivers of France.` }];
        for (let k = 0; k < 4; k++) {
          const { res, message } = await chat(server!.url, id, messages);
          assert.is(res.status, 200, res.text);
          messages.push(message, { role: "user", content: `Another one (${k}).` });
        }
      }),
    );
    const served = engines.map((e, i) => e.requests - before[i]!);
    assert.is(
      served.reduce((a, b) => a + b),
      64,
      `every turn reached an engine once: ${served}`,
    );
    const engineOf = new Map(engines.map((e, i) => [new URL(e.url).host, i]));
    const seen = new Map<string, Set<number>>();
    for (const line of readFileSync(join(prefix, "access.log"), "utf8").trim().split("\n")) {
      const [key, upstream, uri] = line.split(" ");
      if (uri !== "/generate") continue;
      assert.ok(engineOf.has(upstream!), `a request reached ${upstream}`);
      if (!seen.has(key!)) seen.set(key!, new Set());
      seen.get(key!)!.add(engineOf.get(upstream!)!);
    }
    assert.equal([...seen.keys()].sort(), [...ids].sort(), "every turn carried its session's routing key");
    for (const [id, on] of seen) assert.is(on.size, 1, `${id} reached engines ${[...on]}`);
    const perEngine = [0, 1].map((i) => [...seen.values()].filter((on) => on.has(i)).length);
    assert.ok(
      perEngine.every((n) => n > 0),
      `both engines got sessions: ${perEngine}`,
    );
    // Pinned to one engine, each session's later turns hit that engine's prefix cache.
    for (const id of ids) {
      const res = await call<{ records: Array<{ response: { meta_info: { cached_tokens: number } } }> }>(
        server!.url,
        "GET",
        `/sessions/${id}`,
      );
      const hits = res.json.records.map((r) => r.response.meta_info.cached_tokens);
      assert.ok(
        hits.slice(1).every((n) => n > 0),
        `${id}: ${hits}`,
      );
    }
  });
}

test.run();
