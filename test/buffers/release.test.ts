// The release protocol: a buffer's release runs its producer's callback once, however
// often a consumer calls it, and a failing release never fails the consumer.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { callRelease, release, releasable, WRITTEN } from "../../buffers/release.ts";

test("a releasable view runs its callback on the first release only", () => {
  let calls = 0;
  const view = releasable(Buffer.from("bytes"), () => calls++);
  assert.type(view[WRITTEN], "function");
  release(view);
  release(view);
  view[WRITTEN]!();
  assert.is(calls, 1);
});

test("a plain buffer has nothing to release; a throwing release is swallowed", () => {
  release(Buffer.from("plain")); // no release: nothing happens
  release(
    releasable(Buffer.alloc(1), () => {
      throw new Error("the pool's own problem");
    }),
  );
  callRelease(undefined);
});

test.run();
