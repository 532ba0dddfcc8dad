// drained(): a writer that got false from write() waits for 'drain' or 'close', and does
// not wait at all on a stream already destroyed (its 'close' may be gone by then).
import { Writable } from "node:stream";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { drained } from "../../buffers/drained.ts";

/** A writable that takes one byte at a time and holds each write until `flush()`. */
function slowWritable() {
  const held: (() => void)[] = [];
  const stream = new Writable({
    highWaterMark: 1,
    write(_chunk, _encoding, callback) {
      held.push(callback);
    },
  });
  return { stream, flush: () => held.splice(0).forEach((callback) => callback()) };
}

test("resolves on 'drain'", async () => {
  const { stream, flush } = slowWritable();
  assert.is(stream.write("ab"), false);
  let done = false;
  const wait = drained(stream).then(() => (done = true));
  await new Promise((resolve) => setImmediate(resolve));
  assert.is(done, false, "still full");
  flush();
  await wait;
  assert.is(done, true);
});

test("resolves on 'close' when the stream is destroyed while full", async () => {
  const { stream } = slowWritable();
  assert.is(stream.write("ab"), false);
  const wait = drained(stream);
  stream.destroy();
  await wait;
});

test("resolves at once for a stream destroyed and closed before the wait", async () => {
  const { stream } = slowWritable();
  stream.destroy();
  await new Promise((resolve) => stream.once("close", resolve));
  stream.on("error", () => undefined);
  assert.is(stream.write("late"), false, "a write to a destroyed stream returns false");
  const outcome = await Promise.race([
    drained(stream).then(() => "resolved"),
    new Promise((resolve) => setTimeout(() => resolve("hung"), 500)),
  ]);
  assert.is(outcome, "resolved");
});

test.run();
