import { test } from "uvu";
import * as assert from "uvu/assert";
import { Template } from "@huggingface/jinja";
import { renderChat, templateOf, type ChatMessage, type ChatRenderer } from "../../sessions/chat-template.ts";
import { TemplateRenderError } from "../../sessions/errors.ts";
import { generationPromptInputs, inputsArePlain, mayRefuse } from "../../sessions/generation-prompt.ts";
import { planPrompt, promptContext, type PromptContext } from "../../sessions/prompt-builder.ts";
import { selectFamily } from "../../sessions/families/index.ts";
import type { TokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { Trajectory } from "../../sessions/trajectory.ts";
import { qwen3, WEATHER_TOOL } from "./fixtures.ts";

const folder = qwen3();
const family = selectFamily(folder);
const IM_END = folder.tokenId("<|im_end|>")!;
const inputs = (source: string) => generationPromptInputs(new Template(source));

test("Qwen3's generation prompt is a constant suffix that reads only enable_thinking", () => {
  assert.equal(generationPromptInputs(templateOf(folder)), ["enable_thinking"]);
  assert.ok(inputsArePlain(["enable_thinking"], { enable_thinking: false }));
  assert.ok(inputsArePlain(["enable_thinking"], {}));
  assert.not.ok(inputsArePlain(["enable_thinking"], { enable_thinking: { deep: true } }));
});

test("templates whose generation prompt may depend on the conversation are not proven constant", () => {
  const loop = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}";
  assert.equal(inputs(`${loop}{% if add_generation_prompt %}assistant:{% endif %}`), []);
  // Reads the messages, the tools, a variable the loop sets, or calls a function.
  assert.is(inputs(`${loop}{% if add_generation_prompt %}{{ messages[-1].role }}{% endif %}`), undefined);
  assert.is(inputs(`${loop}{% if add_generation_prompt %}{{ tools | length }}{% endif %}`), undefined);
  assert.is(
    inputs(`{% set ns = namespace(n=0) %}${loop}{% if add_generation_prompt %}{{ ns.n }}{% endif %}`),
    undefined,
  );
  assert.is(
    inputs(
      `{% for m in messages %}{% set last = m.role %}{% endfor %}{% if add_generation_prompt %}{{ last }}{% endif %}`,
    ),
    undefined,
  );
  assert.is(inputs(`${loop}{% if add_generation_prompt %}{{ strftime_now('%Y') }}{% endif %}`), undefined);
  assert.is(inputs(`${loop}{% if add_generation_prompt %}{{ 'x' | replace('x', 'y') }}{% endif %}`), undefined);
  // An else branch, a use elsewhere, or a statement after the block.
  assert.is(inputs(`${loop}{% if add_generation_prompt %}a{% else %}b{% endif %}`), undefined);
  assert.is(
    inputs(`{% if add_generation_prompt %}x{% endif %}${loop}{% if add_generation_prompt %}a{% endif %}`),
    undefined,
  );
  assert.is(inputs(`${loop}{% if add_generation_prompt %}a{% endif %}\nend`), undefined);
  assert.is(inputs(loop), undefined);
});

/** Plays turns: the engine "generates" a fixed reply; returns every plan's prompt ids. */
function conversation(ctx: PromptContext, turns: number): { plans: number[][]; requests: ChatMessage[][] } {
  const t = new Trajectory("g");
  const messages: ChatMessage[] = [{ role: "user", content: "Weather in Paris?" }];
  const plans: number[][] = [];
  const requests: ChatMessage[][] = [];
  for (let k = 0; k < turns; k++) {
    if (k > 0) messages.push({ role: "tool", content: `result ${k}` });
    const request = [...messages];
    const plan = planPrompt(ctx, t, request, [WEATHER_TOOL]);
    plans.push(Array.from(plan.promptIds));
    requests.push(request);
    const reply = { role: "assistant", content: `Step ${k}.` };
    t.commit(
      {
        promptIds: plan.promptIds,
        completionIds: [...folder.encode(`Step ${k}.`), IM_END],
        messages: [...request, reply],
        tools: [WEATHER_TOOL],
      },
      family.maxTrimTokens,
    );
    messages.push(reply);
  }
  return { plans, requests };
}

test("every turn ends with the suffix two renders give, for each kwargs value, interleaved on one folder", () => {
  const contexts = [{}, { enable_thinking: false }, { enable_thinking: true }].map((kwargs): PromptContext =>
    promptContext(folder, family, kwargs, ["tool"]),
  );
  for (let round = 0; round < 2; round++) {
    for (const ctx of contexts) {
      const { plans, requests } = conversation(ctx, 4);
      plans.forEach((ids, k) => {
        const options = { tools: [WEATHER_TOOL], kwargs: ctx.kwargs };
        const without = renderChat(folder, requests[k]!, { ...options, addGenerationPrompt: false });
        const withPrompt = renderChat(folder, requests[k]!, { ...options, addGenerationPrompt: true });
        const suffix = folder.encode(withPrompt.slice(without.length));
        assert.equal(ids.slice(ids.length - suffix.length), suffix, `kwargs ${JSON.stringify(ctx.kwargs)}, turn ${k}`);
        // The rest is the previous checkpoint, the newline and the tool segment: unchanged by the suffix.
        if (k > 0)
          assert.equal(
            ids.slice(0, plans[k - 1]!.length),
            plans[k - 1]!.concat(folder.encode(`Step ${k - 1}.`), [IM_END]).slice(0, plans[k - 1]!.length),
          );
      });
    }
  }
});

test("a template that names raise_exception anywhere may refuse a conversation; one that does not cannot", () => {
  assert.ok(mayRefuse(new Template("{% if messages|length > 4 %}{{ raise_exception('too long') }}{% endif %}")));
  assert.ok(mayRefuse(new Template("{% macro no(m) %}{{ raise_exception(m) }}{% endmacro %}{{ no('x') }}")));
  assert.not.ok(mayRefuse(new Template("{% for m in messages %}{{ m.content }}{% endfor %}")));
  // The qwen3 family's own template refuses nothing; qwen3.5's refuses a late system message.
  assert.not.ok(mayRefuse(promptContext(folder, family).renderer.template!));
  const qwen35 = selectFamily(folder, "qwen35");
  assert.ok(mayRefuse(promptContext(folder, qwen35).renderer.template!));
});

test("a template that cannot refuse renders the whole conversation only until the suffix is known", () => {
  const base = promptContext(folder, family, { enable_thinking: false }, ["tool"]);
  // The conversation's own renders start with its first message; the segment renders start with a dummy system message.
  let whole = 0;
  const counting: ChatRenderer = {
    template: base.renderer.template,
    render: (messages, options) => {
      if (messages[0]!.role === "user") whole++;
      return base.renderer.render(messages, options);
    },
  };
  const ctx: PromptContext = { ...base, renderer: counting };
  const { plans, requests } = conversation(ctx, 6);
  // Turn 0 renders once (with the prompt), turn 1 twice (learning the suffix), turns 2-5 never.
  assert.is(whole, 3);
  // And the ids are the two-render ids: the whole request with and without the prompt.
  plans.forEach((ids, k) => {
    const options = { tools: [WEATHER_TOOL], kwargs: ctx.kwargs };
    const without = renderChat(folder, requests[k]!, { ...options, addGenerationPrompt: false });
    const withPrompt = renderChat(folder, requests[k]!, { ...options, addGenerationPrompt: true });
    const suffix = folder.encode(withPrompt.slice(without.length));
    assert.equal(ids.slice(ids.length - suffix.length), suffix, `turn ${k}`);
  });
});

test("a conversation the template rejects is still a 400 once the suffix is known", () => {
  // Raises on more than four messages: turn 1 (3 messages) learns the suffix, turn 2 (5) must fail.
  const strict: TokenizerFolder = {
    ...folder,
    chatTemplate:
      "{% if messages|length > 4 %}{{ raise_exception('too long') }}{% endif %}" +
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
  };
  assert.equal(generationPromptInputs(templateOf(strict)), []);
  // The qwen3 family ships its own template: render with the folder's here.
  const ctx: PromptContext = promptContext(strict, { ...family, template: undefined }, {}, ["tool"]);
  assert.throws(
    () => conversation(ctx, 3),
    (e: unknown) => e instanceof TemplateRenderError && /too long/.test((e as Error).message),
  );
});

test.run();
