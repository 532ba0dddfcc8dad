// Two tito-server instances behind a real nginx, configured from deploy/nginx.conf.template
// (docs/scaling.md): sessions created with PUT land on the instance their id hashes to and
// stay there, both instances get sessions, trajectories are exact, and with one instance
// stopped its sessions get the balancer's clear error while the other's carry on.
// Needs the nginx binary (Debian: apt-get install nginx; .ci/run installs it); without it
// the test says so and skips.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer } from "../../index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import type { SessionBody } from "../helpers/bodies.ts";
import { call, toolLoop } from "../helpers/server.ts";

const TEMPLATE = fileURLToPath(new URL("../../deploy/nginx.conf.template", import.meta.url));
const nginxBin = ["/usr/sbin/nginx", "/usr/bin/nginx", "nginx"].find(
  (bin) => spawnSync(bin, ["-v"], { stdio: "ignore" }).status === 0,
);

const dir = mkdtempSync(join(tmpdir(), "tito-nginx-test-"));
let engine: SimEngine;
let instances: SessionServer[] = [];
let nginx: ChildProcess | undefined;
let balancer = "";

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
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

if (!nginxBin) {
  test("nginx balancer (skipped: no nginx binary; install it with `apt-get install nginx`)", () => {
    console.log("skipping test/server/nginx.test.ts: nginx is not installed (apt-get install nginx)");
  });
} else {
  test.before(async () => {
    engine = await startSimEngine();
    instances = await Promise.all(
      [1, 2].map((i) =>
        startSessionServer({
          engineUrl: engine.url,
          workers: 1,
          port: 0,
          dataDir: join(dir, `instance-${i}`),
          logLevel: "warn",
          allowedAppendRoles: ["tool"],
        }),
      ),
    );
    const prefix = join(dir, "nginx");
    mkdirSync(prefix);
    chmodSync(prefix, 0o777); // nginx started as root runs its worker as nobody
    const port = await freePort();
    const servers = instances.map((s) => `server ${new URL(s.url).host} max_fails=0;`).join("\n    ");
    const conf = readFileSync(TEMPLATE, "utf8")
      .replaceAll("{{PREFIX}}", prefix)
      .replaceAll("{{LISTEN}}", `127.0.0.1:${port}`)
      .replaceAll("{{SERVERS}}", servers);
    writeFileSync(join(prefix, "nginx.conf"), conf);
    const check = spawnSync(nginxBin, ["-t", "-p", prefix, "-c", join(prefix, "nginx.conf")], { encoding: "utf8" });
    assert.is(check.status, 0, `nginx -t: ${check.stderr}`);
    nginx = spawn(nginxBin, ["-p", prefix, "-c", join(prefix, "nginx.conf")], { stdio: "ignore" });
    balancer = `http://127.0.0.1:${port}`;
    await waitFor(`${balancer}/health`);
  });

  test.after(async () => {
    if (nginx?.pid && nginx.exitCode === null && nginx.signalCode === null) {
      const exited = new Promise((r) => nginx!.once("exit", r));
      nginx.kill("SIGTERM");
      await exited;
    }
    await Promise.all(instances.map((s) => s.shutdown()));
    await engine?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("sessions stay on the instance their id hashes to; both instances get sessions; trajectories exact", async () => {
    const ids = Array.from({ length: 16 }, (_, i) => `agent-${i}`);
    const home = new Map<string, string>();
    for (const id of ids) {
      const created = await call(balancer, "PUT", `/sessions/${id}`);
      assert.is(created.status, 201, created.text);
      assert.equal(created.json, { session_id: id });
      home.set(id, created.headers.get("x-tito-instance")!);
    }
    const instanceIds = await Promise.all(
      instances.map(async (s) => (await call<{ session_server_instance_id: string }>(s.url, "GET", "/health")).json),
    );
    const known = instanceIds.map((h) => h.session_server_instance_id);
    assert.equal(new Set(home.values()), new Set(known), "both instances got sessions");

    for (const id of ids) {
      const { first, second } = await toolLoop(balancer, id);
      assert.is(first.res.status, 200);
      assert.is(second.res.status, 200);
      assert.is(first.res.headers.get("x-tito-instance"), home.get(id));
      assert.is(second.res.headers.get("x-tito-instance"), home.get(id));
      const got = await call<SessionBody>(balancer, "GET", `/sessions/${id}`);
      assert.is(got.headers.get("x-tito-instance"), home.get(id));
      const [r1, r2] = got.json.records;
      const acc1 = [
        ...r1!.request.input_ids!,
        ...r1!.response.choices[0]!.meta_info!.output_token_logprobs!.map((p: number[]) => p[1]),
      ];
      assert.equal(r2!.request.input_ids!.slice(0, acc1.length), acc1, `${id}: turn 2 extends turn 1`);
      // The instance that holds it lists it; the other does not know it.
      const owner = instances[known.indexOf(home.get(id)!)]!;
      const other = instances[1 - known.indexOf(home.get(id)!)]!;
      assert.is((await call(owner.url, "GET", `/sessions/${id}`)).status, 200);
      assert.is((await call(other.url, "GET", `/sessions/${id}`)).status, 404);
    }
    const again = await call(balancer, "PUT", `/sessions/${ids[0]}`);
    assert.is(again.status, 409);
    const posted = await call<{ error: string; code: string }>(balancer, "POST", "/sessions");
    assert.is(posted.status, 400);
    assert.match(posted.json.error, /PUT \/sessions\/\{id\}/);
    assert.is(posted.json.code, "TITO_ERR_BALANCER_ROUTE");
    const listed = await call<{ error: string; code: string }>(balancer, "GET", "/sessions");
    assert.is(listed.status, 400);
    assert.equal(Object.keys(listed.json).sort(), ["code", "error"]);
    assert.is(listed.json.code, "TITO_ERR_BALANCER_ROUTE");
  });

  test("one instance stopped: its sessions get the balancer's error, the other's carry on", async () => {
    const ids = Array.from({ length: 32 }, (_, i) => `late-${i}`);
    const home = new Map<string, string>();
    for (const id of ids)
      home.set(id, (await call(balancer, "PUT", `/sessions/${id}`)).headers.get("x-tito-instance")!);
    const stopped = instances[1]!;
    const stoppedId = (await call<{ session_server_instance_id: string }>(stopped.url, "GET", "/health")).json
      .session_server_instance_id;
    assert.ok([...home.values()].includes(stoppedId), "some sessions live on the instance to stop");
    await stopped.shutdown();
    for (const id of ids) {
      const res = await call<{ error: string; code: string }>(balancer, "POST", `/sessions/${id}/v1/chat/completions`, {
        model: "m",
        messages: [{ role: "user", content: "still there?" }],
      });
      if (home.get(id) === stoppedId) {
        assert.is(res.status, 502, `${id}: ${res.text}`);
        assert.match(res.json.error, /instance that holds this session is unreachable/);
        assert.is(res.json.code, "TITO_ERR_INSTANCE_UNREACHABLE");
      } else {
        assert.is(res.status, 200, `${id}: ${res.text}`);
        assert.is(res.headers.get("x-tito-instance"), home.get(id));
      }
    }
  });
}

test.run();
