// Every family, from the rows of family-table.ts: detection and settings (docs/models.md, "The families"),
// boundary ids and drops, drift segments, refused folders, and TITO loops whose prompts
// extend every checkpoint, put the boundary back, equal a fresh render and leave no drift.
// Parsing round trips and each family's oddities are in the family's own test file.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { SessionConfigError } from "../../../sessions/errors.ts";
import { detectFamily, selectFamily, type TitoFamily } from "../../../sessions/families/index.ts";
import { APPENDABLE_ROLES } from "../../../sessions/families/names.ts";
import { promptContext, renderOrThrow } from "../../../sessions/prompt-builder.ts";
import { serverKwargs } from "../../../sessions/template-kwargs.ts";
import type { TokenizerFolder } from "../../../sessions/tokenizer-folder.ts";
import { FAMILY_ROWS, type FamilyRow, type LoopCase, type Token } from "./family-table.ts";
import { driftTypes, playLoop } from "./tito-loop.ts";

/** A token's id: a number as it is, else the folder's token, else the one id its text encodes to. */
function idOf(folder: TokenizerFolder, token: Token): number {
  if (typeof token === "number") return token;
  const id = folder.tokenId(token);
  if (id !== undefined) return id;
  const encoded = folder.encode(token);
  assert.is(encoded.length, 1, `${JSON.stringify(token)} is one token`);
  return encoded[0]!;
}

const sorted = (ids: Iterable<number>) => [...ids].sort((a, b) => a - b);

function checkSettings(row: FamilyRow, folder: TokenizerFolder, family: TitoFamily): void {
  const ids = (tokens: Token[]) => tokens.map((t) => idOf(folder, t));
  assert.is(detectFamily(folder), row.detected ?? row.name);
  assert.is(family.name, row.name);
  assert.is(family.maxTrimTokens, row.maxTrimTokens);
  assert.equal(sorted(family.trailingTokenIds), sorted(ids(row.trailing)));
  assert.equal(family.appendRoles, row.appendRoles);
  // The host refuses any other --allowed-append-roles entry before it spawns a worker.
  for (const role of family.appendRoles) assert.ok(APPENDABLE_ROLES.includes(role), `${role} is in APPENDABLE_ROLES`);
  assert.equal(family.pinnedKwargs, row.pinnedKwargs);
  assert.equal(family.sglangParsers, row.sglangParsers);
  assert.equal(family.stopTokens, row.stopTokens);
  assert.is(family.increment, row.increment);
  assert.equal(family.kwargAliases, row.kwargAliases);
  const renders = family.renderer ? "code" : family.template === undefined ? "folder" : "fixed";
  assert.is(renders, row.renders, "what renders its prompts");
  if (row.renders === "fixed") assert.type(family.template, "string");
  if (row.driftSpecials) assert.equal(sorted(family.driftSpecialIds!), sorted(ids(row.driftSpecials)));
}

function checkBoundary(row: FamilyRow, folder: TokenizerFolder, family: TitoFamily): void {
  const ids = (tokens: Token[]) => tokens.map((t) => idOf(folder, t));
  for (const [accumulated, expected] of row.boundary)
    assert.equal(family.boundaryIds(ids(accumulated)), ids(expected), `boundaryIds(${accumulated.join(" ")})`);
  if (!row.drop) assert.is(family.boundaryDrop, undefined);
  for (const [accumulated, n] of row.drop ?? [])
    assert.is(family.boundaryDrop!(ids(accumulated)), n, `boundaryDrop(${accumulated.join(" ")})`);
  for (const [prev, text, expected] of row.segments)
    assert.is(
      family.isAssistantSegment(prev === undefined ? undefined : idOf(folder, prev), text),
      expected,
      `segment after ${String(prev)}: ${JSON.stringify(text)}`,
    );
}

function checkLoop(row: FamilyRow, loop: LoopCase): void {
  const folder = (loop.folder ?? row.folder)();
  const family = selectFamily(folder, row.name);
  const ctx = promptContext(folder, family, { ...serverKwargs(family) });
  const render = (messages: typeof loop.history) =>
    renderOrThrow(ctx.renderer, messages, { addGenerationPrompt: true, kwargs: { ...ctx.kwargs }, tools: loop.tools });
  const drift = loop.drift ?? { [loop.rounds.length]: [] };
  const { t, turns, requests } = playLoop(ctx, loop.label, loop, (rounds, played) => {
    const expected = drift[rounds];
    if (expected) assert.equal(driftTypes(ctx, played), expected, `${loop.label}: drift after ${rounds} turns`);
  });
  for (const [k, turn] of turns.entries()) {
    if (k < (loop.fresh ?? turns.length))
      assert.equal(
        turn.promptIds,
        folder.encode(render(requests[k]!)),
        `${loop.label}: turn ${k + 1} is a fresh render`,
      );
    if (k > 0) {
      const previous = turns[k - 1]!;
      const checkpoint = [...previous.promptIds, ...previous.completionIds];
      const kept = checkpoint.length - (family.boundaryDrop?.(checkpoint) ?? 0);
      const boundary = family.boundaryIds(checkpoint.slice(0, kept));
      assert.equal(
        turn.promptIds.slice(kept, kept + boundary.length),
        boundary,
        `${loop.label}: turn ${k + 1} boundary`,
      );
      const increment = loop.increments?.[k];
      if (increment !== undefined) assert.is(folder.decode(turn.promptIds.slice(kept + boundary.length)), increment);
    }
    const tail = loop.tails?.[k];
    if (tail !== undefined)
      assert.ok(folder.decode(turn.completionIds).endsWith(tail), `${loop.label}: turn ${k + 1} tail`);
    const callIds = loop.callIds?.[k];
    if (callIds)
      assert.equal(
        (turn.message.tool_calls as Array<{ id: string }>).map((c) => c.id),
        callIds,
      );
  }
  assert.ok(drift[turns.length], "the drift after the last turn is named");
  if (loop.canonical)
    assert.is(
      folder.decode([...t.currentIds]),
      renderOrThrow(ctx.renderer, t.messages, {
        addGenerationPrompt: false,
        kwargs: { ...ctx.kwargs },
        tools: loop.tools,
      }),
      "the trajectory decodes to the canonical render",
    );
}

for (const row of FAMILY_ROWS) {
  test(`${row.name}: detected, settings, boundary, segments, refused folders`, () => {
    const folder = row.folder();
    const family = selectFamily(folder, row.name);
    checkSettings(row, folder, family);
    checkBoundary(row, folder, family);
    for (const [bad, names] of row.refuses)
      assert.throws(
        () => selectFamily(bad(), row.name),
        (e: unknown) => e instanceof SessionConfigError && names.test(e.message),
      );
  });
  for (const loop of row.loops) test(`${row.name}: TITO ${loop.label}`, () => checkLoop(row, loop));
}

test("every family has a row, and every row plays a loop but default and the DeepSeek encoders'", () => {
  const names = FAMILY_ROWS.map((r) => r.name);
  assert.equal([...names].sort(), [...new Set(names)].sort());
  assert.is(names.length, 15);
  assert.equal(
    FAMILY_ROWS.filter((r) => r.loops.length === 0).map((r) => r.name),
    ["default", "deepseekv32", "deepseekv4"],
  );
});

test.run();
