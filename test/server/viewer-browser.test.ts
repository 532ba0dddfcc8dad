// The built-in viewer (docs/viewer.md) in a real browser: Debian's headless chromium, driven
// by playwright-core (never a browser download), against a real tree with the admin token.
// It enters the token, opens a session a tool loop made and checks the token strip against
// the sample's loss_mask (counts, and every drawn cell's colour class), hovers a token and
// reads its id, searches a text, kills a worker and finds the restart in the supervision
// view, opens the rollout view, and saves screenshots. Any error the page shows, or throws,
// fails the test. Without chromium it is skipped with a message (.ci/run installs it).
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer, type SupervisionEvent } from "../../index.ts";
import { shardOf } from "../../server/protocol/shard-protocol.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { waitForEvent } from "../helpers/events.ts";
import type { ChatCompletion, SessionCreatedBody, WireMessage } from "../helpers/bodies.ts";
import { call, WEATHER_TOOL } from "../helpers/server.ts";

const CHROMIUM = "/usr/bin/chromium";
const TOKEN = "viewer-test-admin-token";
const AUTH = { authorization: `Bearer ${TOKEN}` };
const WORKERS = 2;
/** Where the screenshots go: VIEWER_SCREENSHOTS (docs/viewer.md's were taken with docs/), else a temporary folder. */
const shots = process.env.VIEWER_SCREENSHOTS ?? mkdtempSync(join(tmpdir(), "tito-viewer-shots-"));

let engine: SimEngine;
let server: SessionServer;
let context: BrowserContext;
let page: Page;
let profile: string;
const events: SupervisionEvent[] = [];
/** What the page threw or logged as an error (besides what it shows in its banner). */
const pageErrors: string[] = [];

interface Sample {
  tokens: number[];
  loss_mask: number[];
  response_length: number;
  token_texts: string[];
  turns: unknown[];
}

async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await call<T>(server.url, method, path, body, AUTH);
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
  return res.json;
}

/** A tool loop with the admin token: the model calls the tool, the tool answers, the model replies. */
async function toolLoop(id: string): Promise<void> {
  const messages: WireMessage[] = [
    { role: "system", content: "You are helpful." },
    { role: "user", content: "What is the weather in Paris?" },
  ];
  const turn = async () => {
    const body = { model: "m", messages, tools: [WEATHER_TOOL] };
    const reply = await api<ChatCompletion>("POST", `/sessions/${id}/v1/chat/completions`, body);
    messages.push(reply.choices[0]!.message);
    return reply.choices[0]!.message;
  };
  const first = await turn();
  assert.ok(first.tool_calls?.[0], "the model called the tool");
  messages.push({ role: "tool", tool_call_id: first.tool_calls[0].id, content: '{"temp_c": 21}' });
  await turn();
}

/** Fails on an error the page shows in its banner, or one it threw. */
async function noPageError(): Promise<void> {
  const banner = page.locator("#error");
  if (await banner.isVisible()) assert.unreachable(`the page shows an error: ${await banner.textContent()}`);
  assert.equal(pageErrors, [], "the page threw or logged errors");
}

const chromiumHere = existsSync(CHROMIUM);

test.before(async () => {
  if (!chromiumHere) return;
  engine = await startSimEngine();
  server = await startSessionServer({
    engineUrl: engine.url,
    workers: WORKERS,
    authToken: TOKEN,
    restartBackoffMs: 200,
    maxRestarts: 10,
    logLevel: "warn",
    durability: "memory",
    onEvent: (e) => events.push(e),
  });
  profile = mkdtempSync(join(tmpdir(), "tito-viewer-profile-"));
  mkdirSync(shots, { recursive: true });
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    viewport: { width: 1400, height: 1000 },
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on("pageerror", (err) => pageErrors.push(`pageerror: ${err.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") pageErrors.push(`console: ${m.text()}`);
  });
});

test.after(async () => {
  await context?.close();
  await server?.shutdown();
  await engine?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

test("the viewer: token, sessions list, a tool loop's token strip, hover, search, restart, rollout", async () => {
  if (!chromiumHere) {
    console.warn(`${CHROMIUM} is not installed (apt-get install chromium): the viewer's browser test is skipped`);
    return;
  }
  await api("POST", "/admin/resume", { weight_version: "step-7" });
  const { session_id: id } = await api<SessionCreatedBody>("POST", "/sessions");
  await toolLoop(id);
  await api("POST", "/sessions"); // a second session, without turns, for the list
  const sample = await api<Sample>("POST", `/sessions/${id}/samples?token_text=1`, {});
  const ones = sample.loss_mask.filter((m) => m === 1).length;
  const zeros = sample.loss_mask.length - ones;
  assert.ok(ones > 0 && zeros > 0, "a tool loop has tokens in and out of the loss");

  // The page asks for the token, and keeps it in session storage only.
  await page.goto(`${server.url}/ui`);
  await page.locator("#login").waitFor({ state: "visible" });
  // The page's first request, made without a token, is refused: that 401 is how it knows to ask.
  assert.ok(pageErrors.length <= 1 && pageErrors.every((e) => e.includes("status of 401")), pageErrors.join("\n"));
  pageErrors.length = 0;
  await page.fill("#token-input", TOKEN);
  await page.click("#login button[type=submit]");
  const row = page.locator(`#sessions tr[data-session="${id}"]`);
  await row.waitFor();
  assert.is(await row.locator("td").nth(2).textContent(), "2", "the list shows the session's two turns");
  assert.is(await row.locator("td").nth(5).textContent(), "step-7", "the list shows its weight version");
  const stored = await page.evaluate(() => [sessionStorage.getItem("tito-admin-token"), localStorage.length]);
  assert.equal(stored, [TOKEN, 0]);
  await noPageError();

  // The session: counts and the strip's cells against the sample's loss_mask.
  await row.locator("a").click();
  await page.locator(".strip .tok").first().waitFor();
  const fact = async (name: string) => Number(await page.locator(`[data-fact="${name}"]`).textContent());
  assert.is(await fact("loss"), ones, "tokens in the loss = the 1s of loss_mask");
  assert.is(await fact("masked"), zeros, "masked tokens = the 0s of loss_mask");
  assert.is(await fact("tokens"), sample.tokens.length);
  const offset = sample.tokens.length - sample.response_length;
  const cells = await page.$$eval(".strip .tok[data-i]", (els) =>
    els.map((el) => ({ i: Number((el as HTMLElement).dataset.i), cls: el.className })),
  );
  assert.ok(cells.length > 20, `only ${cells.length} token cells drawn`);
  for (const { i, cls } of cells) {
    const expected = i < offset ? "prompt" : sample.loss_mask[i - offset] === 1 ? "loss" : "masked";
    assert.ok(cls.split(" ").includes(expected), `token ${i}: class "${cls}", loss mask says ${expected}`);
  }

  // Hover a token in the loss: the tip shows its id.
  const cell = page.locator(".strip .tok.loss").nth(3);
  const index = Number(await cell.getAttribute("data-i"));
  await cell.hover();
  await page.locator("#tip").waitFor({ state: "visible" });
  assert.is(Number(await page.locator('#tip [data-field="id"]').textContent()), sample.tokens[index]);
  assert.is(await page.locator('#tip [data-field="text"]').textContent(), JSON.stringify(sample.token_texts[index]));

  await page.screenshot({ path: join(shots, "viewer-session.png"), fullPage: true });

  // Search a text of the tool result: it is found and marked.
  await page.fill("#token-search", "temp_c");
  await page.press("#token-search", "Enter");
  assert.match((await page.locator("#search-status").textContent()) ?? "", /^1 of \d+/);
  assert.ok((await page.locator(".strip .tok.hit").count()) > 0, "the match is marked in the strip");
  await noPageError();

  // Kill a worker; the supervision view shows its restart.
  const shard = shardOf(id, WORKERS);
  const pid = server.tree().shards[shard]!.pid!;
  process.kill(pid, "SIGKILL");
  await waitForEvent(
    server,
    () => events,
    (e) => e.actor === `shard-${shard}` && e.kind === "restarted",
  );
  await page.click('nav a[data-nav="supervision"]');
  await page.locator(`#events tr[data-kind="restarted"][data-actor="shard-${shard}"]`).waitFor();
  await page.locator(`#events tr[data-kind="exited"][data-actor="shard-${shard}"]`).waitFor();
  const restarts = page.locator(`#tree .proc[data-actor="shard-${shard}"] [data-restarts]`);
  assert.is(await restarts.getAttribute("data-restarts"), "1");
  await page.screenshot({ path: join(shots, "viewer-supervision.png"), fullPage: true });
  await noPageError();

  // The rollout view: the door as the admin route tells it.
  await page.click('nav a[data-nav="rollout"]');
  await page.locator('[data-fact="weight_version"]').waitFor();
  assert.is(await page.locator('[data-fact="weight_version"]').textContent(), "step-7");
  assert.is(await page.locator('[data-fact="state"]').textContent(), "running");
  // Turns made while it is open show in its metrics (the chat latency histogram's count).
  const { session_id: other } = await api<SessionCreatedBody>("POST", "/sessions");
  await toolLoop(other);
  await page.waitForFunction(() => Number(document.querySelector('[data-fact="turns_seen"]')?.textContent) >= 2);
  await page.waitForFunction(() => Number(document.querySelector<HTMLElement>("#rollout-chart")?.dataset.points) >= 4);
  await page.screenshot({ path: join(shots, "viewer-rollout.png") });
  await noPageError();
  console.log(`viewer screenshots: ${shots}`);
});

test.run();
