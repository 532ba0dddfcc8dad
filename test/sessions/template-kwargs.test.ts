// The template kwargs of a turn (sessions/template-kwargs.ts): the family's pins win over
// nothing and nobody contradicts them, DeepSeek-style alias groups replace each other, and
// equal request values share one merged object (render memos are keyed by it).
import { test } from "uvu";
import * as assert from "uvu/assert";
import { InvalidChatRequestError, PinnedKwargError, SessionConfigError } from "../../sessions/errors.ts";
import { selectFamily, type TitoFamily } from "../../sessions/families/index.ts";
import { serverKwargs, TurnKwargs } from "../../sessions/template-kwargs.ts";
import { qwen3 } from "./fixtures.ts";

// A real family with a pin and an alias group, the shape qwen3 and deepseekv32 give.
const family: TitoFamily = {
  ...selectFamily(qwen3(), "qwen3"),
  pinnedKwargs: { clear_thinking: false },
  kwargAliases: [["thinking_mode", "enable_thinking", "thinking"]],
};

test("serverKwargs: the pins are added; a server value that contradicts one is a config error", () => {
  assert.equal(serverKwargs(family, { enable_thinking: false }), { enable_thinking: false, clear_thinking: false });
  assert.equal(serverKwargs(family, { clear_thinking: false }), { clear_thinking: false });
  assert.throws(
    () => serverKwargs(family, { clear_thinking: true }),
    (e: unknown) =>
      e instanceof SessionConfigError && /clear_thinking=true contradicts the qwen3 family/.test(e.message),
  );
});

test("of(): absent or null is the server's object itself; a pin contradicted is a 400 naming it", () => {
  const kwargs = new TurnKwargs(family, serverKwargs(family, {}));
  assert.is(kwargs.of(undefined), kwargs.base);
  assert.is(kwargs.of(null), kwargs.base);
  assert.equal(kwargs.of({ clear_thinking: false, x: 1 }), { clear_thinking: false, x: 1 });
  try {
    kwargs.of({ clear_thinking: true });
    assert.unreachable("a contradicted pin must throw");
  } catch (err) {
    assert.instance(err, PinnedKwargError);
    assert.is((err as PinnedKwargError).status, 400);
    assert.is((err as PinnedKwargError).code, "TITO_ERR_PINNED_KWARG");
    assert.match((err as Error).message, /chat_template_kwargs\.clear_thinking=true .* pins clear_thinking=false/);
  }
  assert.throws(
    () => kwargs.of([1]),
    (e: unknown) => e instanceof InvalidChatRequestError,
  );
  assert.throws(
    () => kwargs.of("x"),
    (e: unknown) => e instanceof InvalidChatRequestError,
  );
});

test("of(): a request that sets one alias replaces the server's value of the whole group", () => {
  const kwargs = new TurnKwargs(family, serverKwargs(family, { enable_thinking: false, other: 2 }));
  assert.equal(kwargs.of({ thinking: true }), { other: 2, clear_thinking: false, thinking: true });
  assert.equal(kwargs.of({ other: 3 }), { enable_thinking: false, other: 3, clear_thinking: false });
});

test("of(): equal request values share one merged object", () => {
  const kwargs = new TurnKwargs(family, serverKwargs(family, {}));
  const a = kwargs.of({ enable_thinking: false });
  assert.is(kwargs.of({ enable_thinking: false }), a);
  assert.is.not(kwargs.of({ enable_thinking: true }), a);
});

test.run();
