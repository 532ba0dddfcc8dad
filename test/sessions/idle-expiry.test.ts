// The idle-expiry class on its own (sessions/idle-expiry.ts), on a manual clock: a session
// idle past the TTL goes at the first sweep after it is due and then answers "expired";
// one in use is never idle, and its idle time starts when its last request ends; a touch
// postpones it; a failed delete is retried by the next sweep; close() stops the sweeps.
// Minutes of policy in no real time (test/helpers/manual-clock.ts).
import { test } from "uvu";
import * as assert from "uvu/assert";
import { IdleExpiry, sweepPeriodMs } from "../../sessions/idle-expiry.ts";
import { SessionRegistry } from "../../sessions/registry.ts";
import { MemoryRecordStore } from "../../sessions/journal/records.ts";
import { SessionExpiredError } from "../../sessions/errors.ts";
import { ManualClock } from "../helpers/manual-clock.ts";

const TTL = 60_000;
const PERIOD = sweepPeriodMs(TTL);

function setup(records = new MemoryRecordStore()) {
  const clock = new ManualClock();
  const registry = new SessionRegistry();
  let expired = 0;
  const expiry = new IdleExpiry({ ttlMs: TTL, registry, records, clock, onSessionExpired: () => expired++ });
  const open = (id: string) => {
    registry.create(id);
    expiry.touch(id);
  };
  const alive = (id: string) => [...registry.ids()].includes(id);
  return { clock, registry, expiry, open, alive, expired: () => expired };
}

test("the sweep period: a quarter of the TTL, at least 100 ms, at most 30 s", () => {
  assert.equal([sweepPeriodMs(60_000), sweepPeriodMs(200), sweepPeriodMs(3_600_000)], [15_000, 100, 30_000]);
});

test("an idle session goes at the first sweep past its TTL, then answers expired; it is counted once", async () => {
  const { clock, registry, expiry, open, alive, expired } = setup();
  open("idle");
  await clock.advance(TTL);
  assert.ok(alive("idle"), "exactly the TTL idle is not past it");
  await clock.advance(PERIOD);
  assert.not.ok(alive("idle"), "gone at the next sweep");
  assert.throws(
    () => registry.get("idle"),
    (err: unknown) => err instanceof SessionExpiredError,
  );
  assert.is(expired(), 1);
  await clock.advance(10 * TTL);
  assert.is(expired(), 1, "an expired session is not expired again");
  expiry.close();
});

test("a touch postpones expiry; a session in use is never idle, and its idle time starts when the use ends", async () => {
  const { clock, expiry, open, alive } = setup();
  open("touched");
  open("busy");
  let finish!: () => void;
  const inUse = expiry.busy("busy", () => new Promise<void>((resolve) => (finish = resolve)));
  for (let i = 0; i < 6; i++) {
    await clock.advance(TTL / 2);
    expiry.touch("touched");
  }
  assert.ok(alive("touched"), "touched every half TTL, never idle");
  assert.ok(alive("busy"), "three TTLs in use: never idle");
  finish();
  await inUse;
  await clock.advance(TTL);
  assert.ok(alive("busy"), "its idle time started when the use ended");
  await clock.advance(PERIOD);
  assert.not.ok(alive("busy"));
  assert.not.ok(alive("touched"), "not touched since: idle too");
  expiry.close();
});

test("a forgotten session is no longer tracked; close() stops the sweeps", async () => {
  const { clock, expiry, open, alive, expired } = setup();
  open("deleted");
  expiry.forget("deleted");
  await clock.advance(2 * TTL);
  assert.ok(alive("deleted"), "forgotten (its DELETE's job), so the sweep leaves it to the registry");
  assert.is(expired(), 0);
  open("after-close");
  expiry.close();
  assert.is(clock.pending, 0, "no sweep timer left");
  await clock.advance(10 * TTL);
  assert.ok(alive("after-close"));
});

test("a delete that fails (its journal write) leaves the session, and the next sweep expires it", async () => {
  const records = new MemoryRecordStore();
  const drop = records.drop.bind(records);
  let failures = 1;
  records.drop = async (id: string) => {
    if (failures-- > 0) throw new Error("disk full");
    return drop(id);
  };
  const { clock, registry, expiry, open, alive, expired } = setup(records);
  open("flaky");
  await clock.advance(TTL + PERIOD);
  assert.ok(alive("flaky"), "the failed delete left it");
  assert.ok(registry.get("flaky"), "open again, not half deleted");
  await clock.advance(PERIOD);
  assert.not.ok(alive("flaky"), "the next sweep took it");
  assert.is(expired(), 1);
  expiry.close();
});

test.run();
