// SGLang's context length is a hint (engine/context-length.ts): a failed GET /v1/models
// leaves turns unchecked, and is tried again only after OPTIONAL_RETRY_MS, so an engine
// without the route does not cost every turn one more request.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { OPTIONAL_RETRY_MS, optionalContextLength } from "../../engine/context-length.ts";
import type { servedModel } from "../../engine/served-model.ts";

test("a failed read is retried after OPTIONAL_RETRY_MS, not at every turn; a good one is used", async () => {
  let reads = 0;
  let fail = true;
  const served = {
    info: async () => {
      reads++;
      if (fail) throw new Error("the engine answered GET /v1/models with 404");
      return { model: "m", maxModelLen: 4096 };
    },
    forget() {},
  } as ReturnType<typeof servedModel>;
  let clock = 1_000;
  const length = optionalContextLength(served, () => clock);
  assert.is(await length({}), undefined);
  assert.is(reads, 1);
  for (let turn = 0; turn < 5; turn++) assert.is(await length({}), undefined);
  assert.is(reads, 1, "no read while the window lasts");
  clock += OPTIONAL_RETRY_MS;
  fail = false;
  assert.is(await length({}), 4096);
  assert.is(reads, 2, "read again once the window is over");
});

test.run();
