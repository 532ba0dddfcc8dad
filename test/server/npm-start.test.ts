// `npm start` under a process manager: npm runs the script through `sh -c`, and a shell
// that forks node (instead of exec'ing it) takes a SIGTERM itself and leaves the server
// running, orphaned. The script execs node, so a SIGTERM to npm (which passes it to its
// child) or to npm's child reaches the server, which shuts down cleanly with every child.
// Real processes: npm, the CLI, its router and worker.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { alive, waitGone } from "../helpers/events.ts";
import type { SupervisionBody } from "../helpers/bodies.ts";
import { call } from "../helpers/server.ts";

const REPO = fileURLToPath(new URL("../..", import.meta.url));
let engine: SimEngine;
const started: number[] = [];

test.before(async () => {
  engine = await startSimEngine();
});
test.after(async () => {
  for (const pid of started.filter(alive)) process.kill(pid, "SIGKILL");
  await engine?.close();
});

/** npm as `npm test` ran it (npm_execpath), else the one on PATH. */
function npmCommand(): [string, string[]] {
  const cli = process.env.npm_execpath;
  return cli && cli.endsWith(".js") ? [process.execPath, [cli]] : ["npm", []];
}

const childrenOf = (pid: number): number[] =>
  readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
const cmdline = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);

async function npmStart() {
  const [cmd, pre] = npmCommand();
  const args = ["start", "--", "--port", "0", "--workers", "1", "--engine", engine.url, "--log-level", "warn"];
  const npm = spawn(cmd, [...pre, ...args], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
  started.push(npm.pid!);
  let stdout = "";
  let stderr = "";
  npm.stderr!.on("data", (d) => (stderr += d));
  const exit = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    npm.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const url = await new Promise<string>((resolve, reject) => {
    npm.stdout!.on("data", (d) => {
      stdout += d;
      const ready = /tito-server ready url=(\S+)/.exec(stdout);
      if (ready) resolve(ready[1]!);
    });
    void exit.then(() => reject(new Error(`npm start exited before ready: ${stderr}`)));
  });
  const tree = (await call<SupervisionBody>(url, "GET", "/supervision")).json;
  // The host first: killed, it takes its children with it.
  const pids = [tree.host_pid, tree.router.pid!, ...tree.shards.map((s) => s.pid!)];
  started.push(...pids);
  const [script] = childrenOf(npm.pid!);
  started.push(script!);
  return { npm, script: script!, host: tree.host_pid, pids, exit, stderr: () => stderr };
}

test("npm's child is the server itself: node, not a shell", async () => {
  const run = await npmStart();
  const argv = cmdline(run.script);
  assert.match(argv[0]!, /(^|\/)node$/, `npm's child runs ${argv.join(" ")}`);
  assert.ok(argv.includes("bin/tito-server.js") && argv.includes("serve"), argv.join(" "));
  assert.is(run.host, run.script, "the script's process is the host");
  // A SIGTERM to it, as to the `sh -c` a process manager sees under npm.
  process.kill(run.script, "SIGTERM");
  assert.equal(await run.exit, { code: 0, signal: null });
  assert.match(run.stderr(), /tito-server: SIGTERM: shutting down/);
  assert.equal(await waitGone([run.script, ...run.pids], 10_000), [], "no process of the tree is left");
});

test("a SIGTERM to npm reaches the server: clean shutdown, npm exits 0, no orphan", async () => {
  const run = await npmStart();
  process.kill(run.npm.pid!, "SIGTERM");
  assert.equal(await run.exit, { code: 0, signal: null });
  assert.match(run.stderr(), /tito-server: SIGTERM: shutting down/);
  assert.equal(await waitGone([run.script, ...run.pids], 10_000), [], "no process of the tree is left");
});

test.run();
