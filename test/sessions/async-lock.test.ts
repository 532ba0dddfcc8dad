import { test } from "uvu";
import * as assert from "uvu/assert";
import { AsyncLock } from "../../sessions/async-lock.ts";

test("holders run one at a time, in FIFO order, even when earlier ones are slower", async () => {
  const lock = new AsyncLock();
  const events: string[] = [];
  let active = 0;
  // Each holder, once running, hands the test its release function through `running`.
  let announce!: (release: () => void) => void;
  let running = new Promise<() => void>((r) => (announce = r));
  const holders = [0, 1, 2, 3].map((i) =>
    lock.run(async () => {
      active++;
      assert.is(active, 1, "never two holders at once");
      events.push(`start ${i}`);
      await new Promise<void>((release) => announce(release));
      events.push(`end ${i}`);
      active--;
      return i;
    }),
  );
  assert.is(lock.pending, 4);
  for (let i = 0; i < 4; i++) {
    const release = await running;
    running = new Promise<() => void>((r) => (announce = r));
    assert.is(events[events.length - 1], `start ${i}`, "the next holder in line, and only it, is running");
    release();
  }
  assert.equal(await Promise.all(holders), [0, 1, 2, 3]);
  assert.equal(events, ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2", "start 3", "end 3"]);
  assert.is(lock.pending, 0);
});

test("a holder that throws releases the lock and its caller sees the error", async () => {
  const lock = new AsyncLock();
  const failed = lock.run(() => {
    throw new Error("boom");
  });
  const next = lock.run(() => "ok");
  try {
    await failed;
    assert.unreachable();
  } catch (err) {
    assert.is((err as Error).message, "boom");
  }
  assert.is(await next, "ok");
});

test.run();
