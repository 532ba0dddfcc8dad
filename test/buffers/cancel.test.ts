// Cancel: an AbortController without an EventTarget. Listeners run once, in order, on the
// first abort only; removed ones and ones added after the abort never run; a throwing
// listener does not stop the others; and an AbortSignal fits where a CancelSignal is taken.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { Cancel, type CancelSignal } from "../../buffers/cancel.ts";

test("abort runs each listener once, in order, and sets aborted and reason", () => {
  const cancel = new Cancel();
  const calls: string[] = [];
  const a = () => calls.push("a");
  cancel.addEventListener("abort", a, { once: true });
  cancel.addEventListener("abort", a); // the same listener twice is one listener
  cancel.addEventListener("abort", () => calls.push("b"));
  assert.is(cancel.aborted, false);
  const reason = new Error("gone");
  cancel.abort(reason);
  cancel.abort(new Error("again")); // a second abort changes nothing
  assert.equal(calls, ["a", "b"]);
  assert.is(cancel.aborted, true);
  assert.is(cancel.reason, reason);
  assert.is(cancel.signal, cancel);
});

test("a removed listener, or one added after the abort, never runs", () => {
  const cancel = new Cancel();
  let removed = 0;
  let late = 0;
  const listener = () => removed++;
  cancel.addEventListener("abort", listener);
  cancel.removeEventListener("abort", listener);
  cancel.removeEventListener("abort", () => undefined); // not added: nothing happens
  cancel.abort();
  cancel.addEventListener("abort", () => late++);
  assert.equal([removed, late], [0, 0]);
  assert.instance(cancel.reason, DOMException);
  assert.is((cancel.reason as DOMException).name, "AbortError");
});

test("a listener removed by an earlier one during the abort does not run, as with an AbortSignal", () => {
  for (const make of [() => new Cancel(), () => new AbortController()]) {
    const controller = make();
    const signal: CancelSignal = controller.signal;
    const calls: string[] = [];
    const second = () => calls.push("second");
    signal.addEventListener("abort", () => {
      calls.push("first");
      signal.removeEventListener("abort", second);
    });
    signal.addEventListener("abort", second);
    controller.abort();
    assert.equal(calls, ["first"], controller.constructor.name);
  }
});

test("a throwing listener does not stop the others; its error surfaces on a later tick", async () => {
  const cancel = new Cancel();
  let after = 0;
  cancel.addEventListener("abort", () => {
    throw new Error("listener failed");
  });
  cancel.addEventListener("abort", () => after++);
  const surfaced = new Promise<Error>((resolve) => process.once("uncaughtException", resolve));
  cancel.abort();
  assert.is(after, 1);
  assert.match((await surfaced).message, "listener failed");
});

test("an AbortSignal is a CancelSignal", () => {
  const controller = new AbortController();
  const signal: CancelSignal = controller.signal;
  let calls = 0;
  signal.addEventListener("abort", () => calls++, { once: true });
  controller.abort(new Error("x"));
  assert.equal([signal.aborted, calls], [true, 1]);
});

test.run();
