import { test } from "uvu";
import * as assert from "uvu/assert";
import { RestartPolicy } from "../../actors/index.ts";

const noJitter = () => 0.5; // 2*0.5-1 = 0: no jitter

test("backoff doubles from the base up to the cap", () => {
  const policy = new RestartPolicy({ maxRestarts: 100, baseBackoffMs: 250, maxBackoffMs: 1000 });
  const delays: number[] = [];
  for (let i = 0; i < 5; i++) {
    const d = policy.noteExit(i, noJitter);
    assert.is(d.action, "restart");
    if (d.action === "restart") delays.push(d.backoffMs);
  }
  assert.equal(delays, [250, 500, 1000, 1000, 1000]);
  assert.is(policy.restarts, 5);
});

test("jitter stays within its fraction", () => {
  const low = new RestartPolicy({ jitter: 0.2 }).noteExit(0, () => 0);
  const high = new RestartPolicy({ jitter: 0.2 }).noteExit(0, () => 1);
  assert.equal(low, { action: "restart", attempt: 1, backoffMs: 200, unstable: true });
  assert.equal(high, { action: "restart", attempt: 1, backoffMs: 300, unstable: true });
});

test("more than maxRestarts within the sliding window escalates", () => {
  const policy = new RestartPolicy({ maxRestarts: 2, windowMs: 1000 });
  assert.is(policy.noteExit(0, noJitter).action, "restart");
  assert.is(policy.noteExit(100, noJitter).action, "restart");
  const third = policy.noteExit(200, noJitter);
  assert.is(third.action, "escalate");
  if (third.action === "escalate") assert.match(third.reason, /more than 2 restart\(s\) within 1000 ms/);
});

test("restarts older than the window no longer count", () => {
  const policy = new RestartPolicy({ maxRestarts: 2, windowMs: 1000 });
  policy.noteExit(0, noJitter);
  policy.noteExit(100, noJitter);
  assert.is(policy.noteExit(1_500, noJitter).action, "restart", "the first two left the window");
});

test("maxRestarts 0 fails fast on the first death", () => {
  assert.is(new RestartPolicy({ maxRestarts: 0 }).noteExit(0).action, "escalate");
});

test("stable uptime resets the backoff; an early death is unstable", () => {
  const policy = new RestartPolicy({ maxRestarts: 100, stableAfterMs: 30_000, unstableWithinMs: 1_000 });
  policy.noteExit(0, noJitter);
  policy.noteExit(10, noJitter);
  policy.noteReady(100);
  const early = policy.noteExit(500, noJitter);
  assert.equal(early, { action: "restart", attempt: 3, backoffMs: 1000, unstable: true });
  policy.noteReady(1_000);
  const late = policy.noteExit(40_000, noJitter);
  assert.equal(late, { action: "restart", attempt: 1, backoffMs: 250, unstable: false });
});

test("the spawn delay is handed out once", () => {
  const policy = new RestartPolicy();
  assert.is(policy.takeSpawnDelay(), 0);
  policy.noteExit(0, noJitter);
  assert.is(policy.takeSpawnDelay(), 250);
  assert.is(policy.takeSpawnDelay(), 0);
});

test.run();
