// The real CLI as a child process: ready line, clean shutdown, no orphans, fail-fast exit,
// and host death taking every child with it; flag parsing and usage errors through its
// main() in this process, with one real process per exit code.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { waitGone } from "../helpers/events.ts";
import { runCli, runMain, spawnCli, startCli, type CliRun } from "../helpers/cli.ts";
import { LOCK_FILE } from "../../server/host/data-dir-lock.ts";
import type { SessionCreatedBody, SupervisionBody } from "../helpers/bodies.ts";
import { call } from "../helpers/server.ts";
import { npmTokenizerDir } from "../sessions/fixtures.ts";
import { MESSAGE_MATCHERS as HOST_MATCHERS } from "../../server/host/options.ts";
import { FLAG_OF, FLAGS } from "../../server/host/cli.ts";
import { MESSAGE_MATCHERS } from "../../sessions/message-compare.ts";

let engine: SimEngine;
const dir = mkdtempSync(join(tmpdir(), "tito-cli-test-"));

test.before(async () => {
  engine = await startSimEngine();
});
test.after(async () => {
  await engine?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function treePids(url: string): Promise<number[]> {
  const tree = (await call<SupervisionBody>(url, "GET", "/supervision")).json;
  return [tree.router.pid!, ...tree.shards.map((s) => s.pid!)];
}

test("--help and bad flags (main() in this process; one bad flag also through a real process: exit 2)", async () => {
  const help = await runMain(["serve", "--help"]);
  assert.is(help.code, 0);
  assert.match(help.stdout, /--max-restarts/);
  assert.match(help.stdout, /--engine URL/);
  assert.match(
    help.stdout,
    /--workers N {18}worker processes \/ shards \(default: the available CPU\n\s+cores, at most 8\)/,
  );
  const bad = await runMain(["serve", "--workers", "zero"]);
  assert.is(bad.code, 2);
  assert.match(bad.stderr, /--workers must be a number/);
  const unknown = await runMain(["serve", "--no-such-flag"]);
  assert.is(unknown.code, 2);
  const command = await runMain(["frobnicate"]);
  assert.is(command.code, 2);
  const family = await runMain(["serve", "--tito-family", "qwen4"]);
  assert.is(family.code, 2);
  assert.match(family.stderr, /--tito-family must be one of default, qwen3, qwennext, .*llama3, gemma3, got "qwen4"/);
  // The exit code and the streams of a real process, for the usage-error class.
  const spawned = await runCli(["serve", "--workers", "zero"]);
  assert.is(spawned.code, 2);
  assert.is(spawned.stderr, bad.stderr);
  assert.is(spawned.stdout, "");
});

test("every value is checked before anything starts, and errors name the flag", async () => {
  const cases: Array<[string[], string]> = [
    // No --engine: nothing about a simulated engine may be printed before the refusal.
    [["--workers", "0"], "--workers must be an integer between 1 and 256, got 0"],
    [["--max-restarts", "-1"], "--max-restarts must be an integer of at least 0, got -1"],
    [["--restart-window-ms", "0"], "--restart-window-ms must be an integer of at least 1, got 0"],
    [["--port", "70000"], "--port must be an integer between 0 and 65535, got 70000"],
    [["--engine", "ftp://x"], "--engine must be an http(s) URL, got ftp://x"],
    [["--durability", "disk"], '--durability must be one of journal, memory, got "disk"'],
    [["--records-nice", "20"], "--records-nice must be an integer between 0 and 19, got 20"],
    [["--records-nice=-1"], "--records-nice must be an integer between 0 and 19, got -1"],
    [["--records-handoff-min-bytes", "-1"], "--records-handoff-min-bytes must be an integer of at least 0, got -1"],
    [["--log-level", "loud"], '--log-level must be one of fatal, error, warn, info, debug, trace, silent, got "loud"'],
    [["--message-matcher", "lenient"], '--message-matcher must be one of strict, loose, role-content, got "lenient"'],
    // A role no family appends: refused by the host, before a worker loads a tokenizer to refuse it.
    [
      ["--allowed-append-roles", "user,bogus"],
      '--allowed-append-roles takes tool, user, system, assistant; got "bogus"',
    ],
  ];
  for (const [args, message] of cases) {
    const run = await runMain(["serve", "--port", "0", ...args]);
    assert.is(run.code, 2, `${args.join(" ")}: ${run.stderr}`);
    assert.is(run.stderr, `tito-server: ${message}\n(see tito-server serve --help)\n`);
    assert.is(run.stdout, "");
  }
});

test("a worker's configuration error exits 2 at once with its message; the worker is not restarted", async () => {
  // The gemma3 family appends only user messages: "tool" is refused by the session core
  // before the worker is ready. Without the init rule the worker was restarted 3 times.
  const args = ["--engine", engine.url, "--workers", "1", "--tokenizer", npmTokenizerDir("gemma3")];
  const run = await runCli(["serve", "--port", "0", ...args, "--allowed-append-roles", "tool,user"]);
  assert.is(run.code, 2, run.stderr);
  assert.match(
    run.stderr,
    /tito-server: shard-0 could not start: allowed append role "tool" is not one the gemma3 family can append/,
  );
  assert.not.match(run.stderr, /restarting/, "no restart was attempted");
  assert.is(run.stdout, "");
});

test("a port in use: the router's start fails at once (exit 2, its message), the router is not restarted", async () => {
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
  const port = (holder.address() as AddressInfo).port;
  try {
    const args = ["serve", "--port", String(port), "--engine", engine.url, "--workers", "1", "--log-level", "warn"];
    const run = await runMain(args);
    assert.is(run.code, 2, run.stderr);
    assert.match(
      run.stderr,
      `tito-server: router could not start: cannot listen on 127.0.0.1:${port}: listen EADDRINUSE`,
    );
    assert.not.match(run.stderr, /router restarting/, "no restart was attempted");
    assert.is(run.stdout, "");
  } finally {
    holder.close();
  }
});

test("without --workers, one worker per available core, at most 8", async () => {
  const run = await startCli(["--port", "0", "--engine", engine.url, "--log-level", "warn"]);
  const expected = Math.min(availableParallelism(), 8);
  assert.match(run.readyLine, new RegExp(` workers=${expected} `));
  assert.is((await call<SupervisionBody>(run.url, "GET", "/supervision")).json.shards.length, expected);
  run.proc.kill("SIGTERM");
  assert.is((await run.exit).code, 0);
});

/**
 * Starts the CLI on a --data-dir and stops its worker (SIGSTOP), so a shutdown must wait
 * out its grace. One worker: a stopped one is what the signals are tested against.
 */
async function stuckShutdown(name: string): Promise<{ run: CliRun; pids: number[]; lock: string }> {
  const dataDir = join(dir, name);
  const run = await startCli(["--port", "0", "--workers", "1", "--engine", engine.url, "--data-dir", dataDir]);
  const pids = await treePids(run.url);
  const lock = join(dataDir, LOCK_FILE);
  assert.ok(existsSync(lock));
  process.kill(pids[1]!, "SIGSTOP");
  return { run, pids, lock };
}

test("a second SIGTERM during shutdown is ignored: exit 0, the lock removed, no child left", async () => {
  const { run, pids, lock } = await stuckShutdown("signals-term");
  run.proc.kill("SIGTERM");
  await run.waitForStderr(/SIGTERM: shutting down/);
  run.proc.kill("SIGTERM");
  await run.waitForStderr(/SIGTERM ignored: already shutting down/);
  assert.equal(await run.exit, { code: 0, signal: null });
  assert.not.ok(existsSync(lock), "the data directory's lock is released");
  assert.equal(await waitGone(pids, 5_000), []);
});

test("a third SIGINT forces the exit (130): children killed, the lock still removed", async () => {
  const { run, pids, lock } = await stuckShutdown("signals-int");
  run.proc.kill("SIGINT");
  await run.waitForStderr(/SIGINT: shutting down/);
  run.proc.kill("SIGINT");
  await run.waitForStderr(/SIGINT ignored: already shutting down/);
  run.proc.kill("SIGINT");
  assert.equal(await run.exit, { code: 130, signal: null });
  assert.match(run.stderr(), /third SIGINT: forcing the exit/);
  assert.not.ok(existsSync(lock), "the data directory's lock is released");
  assert.equal(await waitGone(pids, 5_000), []);
});

test("a SIGTERM during the start shuts down what started: exit 0, no ready line, no lock, no child", async () => {
  const dataDir = join(dir, "signal-at-start");
  const cli = spawnCli(["--port", "0", "--workers", "2", "--engine", engine.url, "--data-dir", dataDir]);
  await cli.waitForStderr(/shard-1 spawned pid=\d+/);
  cli.proc.kill("SIGTERM");
  assert.equal(await cli.exit, { code: 0, signal: null });
  assert.is(cli.stdout(), "", "never announced ready");
  assert.match(cli.stderr(), /SIGTERM: shutting down/);
  const pids = [...cli.stderr().matchAll(/ spawned pid=(\d+)/g)].map((m) => Number(m[1]));
  assert.ok(pids.length >= 2);
  assert.equal(await waitGone(pids, 5_000), []);
  assert.not.ok(existsSync(join(dataDir, LOCK_FILE)));
});

test("every flag has its option's name for errors, so no error names an option the user did not type", () => {
  const flags = Object.keys(FLAGS).filter((flag) => flag !== "help");
  assert.equal(Object.values(FLAG_OF).sort(), flags.map((flag) => `--${flag}`).sort());
});

test("the host's message matcher list is the session layer's (host/ cannot import sessions/ values)", () => {
  assert.equal([...HOST_MATCHERS], [...MESSAGE_MATCHERS]);
});

test("ready line, a working session, SIGTERM exits 0 and leaves no child", async () => {
  const events = join(dir, "events.jsonl");
  const run = await startCli([
    "--port",
    "0",
    "--workers",
    "2",
    "--engine",
    engine.url,
    "--events",
    events,
    "--log-level",
    "info",
    "--auth-token",
    "s3cret",
  ]);
  assert.match(run.readyLine, /^tito-server ready url=http:\/\/127\.0\.0\.1:\d+ workers=2 instance=[0-9a-f]{32}$/);
  const auth = { authorization: "Bearer s3cret" };
  assert.is((await call(run.url, "GET", "/health")).status, 200, "/health needs no token");
  assert.is((await call(run.url, "HEAD", "/health")).status, 200, "nor does HEAD /health");
  for (const path of ["/health?x=1", "/health/", "//health"])
    assert.is((await call(run.url, "GET", path)).status, 401, `only the exact /health is open, not ${path}`);
  const refused = await call(run.url, "POST", "/sessions");
  assert.is(refused.status, 401);
  assert.equal(refused.json, { error: "missing or invalid bearer token", code: "TITO_ERR_UNAUTHORIZED" });
  assert.is((await call(run.url, "POST", "/sessions", undefined, { authorization: "Bearer wrong" })).status, 401);
  const created = await call<SessionCreatedBody>(run.url, "POST", "/sessions", undefined, auth);
  assert.is(created.status, 200);
  const turn = await call(
    run.url,
    "POST",
    `/sessions/${created.json.session_id}/v1/chat/completions`,
    { model: "m", messages: [{ role: "user", content: "hi" }] },
    auth,
  );
  assert.is(turn.status, 200);
  const tree = (await call<SupervisionBody>(run.url, "GET", "/supervision", undefined, auth)).json;
  const pids = [tree.router.pid!, ...tree.shards.map((s) => s.pid!)];
  run.proc.kill("SIGTERM");
  const { code } = await run.exit;
  assert.is(code, 0);
  assert.equal(await waitGone(pids, 5_000), []);
  const lines = readFileSync(events, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  assert.ok(lines.some((e) => e.actor === "shard-1" && e.kind === "ready"));
  assert.equal(lines.at(-1).actor, "supervisor");
  assert.equal(lines.at(-1).kind, "stopped");
  assert.match(run.stderr(), /\[supervision #\d+\] shard-0 ready/);
  assert.match(run.stderr(), /shard-0 follows the qwen3 tito family/, "the family is logged at startup");
});

test("with --max-restarts 1, two deaths escalate: the CLI prints why and exits non-zero, no child left", async () => {
  const run = await startCli([
    "--port",
    "0",
    "--workers",
    "1",
    "--engine",
    engine.url,
    "--max-restarts",
    "1",
    "--log-level",
    "warn",
  ]);
  const first = await treePids(run.url);
  process.kill(first[1], "SIGKILL");
  let second: number[] = first;
  for (let i = 0; i < 400; i++) {
    const tree = (await call<SupervisionBody>(run.url, "GET", "/supervision")).json;
    if (tree.shards[0].state === "running" && tree.shards[0].pid !== first[1]) {
      second = [tree.router.pid!, tree.shards[0].pid!];
      break;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.is.not(second[1], first[1], "the worker was restarted");
  process.kill(second[1], "SIGKILL");
  const { code } = await run.exit;
  assert.is(code, 1);
  assert.match(run.stderr(), /escalated/);
  assert.match(run.stderr(), /the session server failed: shard-0/);
  assert.equal(await waitGone([...first, ...second], 5_000), []);
});

test("kill -9 of the host: every child exits within 5 s; the next server sweeps its socket directory", async () => {
  // A killed host cannot remove its socket and data directories: keep them in ours.
  const tmp = join(dir, "host-tmp");
  mkdirSync(tmp);
  // One worker: what is left behind and swept does not depend on the count.
  const args = ["--port", "0", "--workers", "1", "--engine", engine.url, "--log-level", "warn"];
  const run = await startCli(args, { env: { TMPDIR: tmp } });
  const pids = await treePids(run.url);
  run.proc.kill("SIGKILL");
  await run.exit;
  assert.equal(await waitGone(pids, 5_000), []);
  const left = readdirSync(tmp);
  const sockDir = left.find((name) => name.startsWith(`tito-sock-${run.proc.pid}-`));
  assert.ok(sockDir, `the killed host's socket directory is left behind: ${left.join(", ")}`);
  // (The workers, exiting on their own, close their sockets: what is left is the directory.)
  const inside = readdirSync(join(tmp, sockDir));
  assert.ok(
    inside.every((n) => n.endsWith(".sock")),
    `nothing but sockets in it: ${inside.join(", ")}`,
  );
  const dataDir = left.find((name) => name.startsWith("tito-data-"));
  assert.ok(dataDir, "and its journal directory");

  const next = await startCli(args, { env: { TMPDIR: tmp } });
  const now = readdirSync(tmp);
  assert.not.ok(now.includes(sockDir), "the dead host's socket directory was swept");
  assert.ok(now.includes(dataDir), "a data directory is never swept");
  assert.ok(
    now.some((name) => name.startsWith(`tito-sock-${next.proc.pid}-`)),
    "the new host has its own",
  );
  // At once after the ready line, as a supervisor may: the handlers are in place before it is written.
  next.proc.kill("SIGTERM");
  assert.equal(await next.exit, { code: 0, signal: null });
  assert.not.ok(
    readdirSync(tmp).some((name) => name.startsWith("tito-sock-")),
    "a clean shutdown removes its own directory",
  );
});

test("a --data-dir locked by a live server is refused before anything starts or prints", async () => {
  const locked = join(dir, "locked");
  mkdirSync(locked);
  writeFileSync(join(locked, "tito-server.lock"), JSON.stringify({ pid: process.pid, instance: "holder" }));
  const tmp = join(dir, "locked-tmp");
  mkdirSync(tmp);
  // No --engine: before the fix, the simulated engine was announced (and started) first.
  const res = await runCli(["serve", "--port", "0", "--workers", "1", "--data-dir", locked], { TMPDIR: tmp });
  assert.is(res.code, 1);
  assert.is(
    res.stderr,
    `tito-server: data directory ${locked} is in use by another tito-server (pid ${process.pid}): ` +
      `one server per --data-dir. If no such server runs (the pid was reused), remove ${join(locked, "tito-server.lock")}\n`,
  );
  assert.is(res.stdout, "");
  assert.equal(readdirSync(tmp), [], "no socket or data directory was made");
});

test.run();
