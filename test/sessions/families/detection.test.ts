// Family detection from a tokenizer folder (docs/models.md, "Detection"): each family's
// token set, on a small real folder, gives that family; first match wins in the documented
// order; a plain tokenizer is `default`. selectFamily: a name overrides detection, an
// unknown name is a config error that lists every name.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { SessionConfigError } from "../../../sessions/errors.ts";
import { detectFamily, FAMILY_NAMES, selectFamily } from "../../../sessions/families/index.ts";
import { syntheticFolder, type AddedToken } from "../../helpers/synthetic-tokenizer.ts";

const PLAIN = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}";

function folder(tokens: Array<string | AddedToken>, template = PLAIN, modelType?: string) {
  const added = tokens.map((t) => (typeof t === "string" ? { content: t } : t));
  return syntheticFolder({ added, template, modelType });
}

const CHATML_QWEN3 = [
  { content: "<|endoftext|>", id: 151643 },
  { content: "<|im_start|>", id: 151644 },
  { content: "<|im_end|>", id: 151645 },
];
const QWEN3_TEMPLATE =
  "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
  "{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}";
const NEXT_TEMPLATE =
  "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
  "{% if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{% endif %}";
const INSTRUCT_TEMPLATE =
  "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
  "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

const cases: Array<[string, () => ReturnType<typeof folder>]> = [
  ["inkling", () => folder(["<|message_user|>", "<|message_model|>", "<|content_model_end_sampling|>"])],
  ["deepseekv32", () => folder(["<｜User｜>", "<｜Assistant｜>"], PLAIN, "deepseek_v32")],
  ["deepseekv4", () => folder(["<｜User｜>", "<｜Assistant｜>"], PLAIN, "deepseek_v4")],
  ["minimax_m25", () => folder(["]~!b[", "]~b]", "[e~["], "You are MiniMax-M2.5. {{ messages }}")],
  ["minimax_m27", () => folder(["]~!b[", "]~b]", "[e~["], "You are MiniMax-M2.7. {{ messages }}")],
  ["kimi25", () => folder(["<|im_assistant|>", "<|im_middle|>", "<|tool_calls_section_begin|>", "<|im_end|>"])],
  [
    "kimi26",
    () =>
      folder(
        ["<|im_assistant|>", "<|im_middle|>", "<|tool_calls_section_begin|>", "<|im_end|>"],
        "{% if preserve_thinking %}{% endif %}{{ messages }}",
      ),
  ],
  ["glm47", () => folder(["[gMASK]", "<sop>", "<|user|>", "<|assistant|>", "<|observation|>"])],
  ["qwen3", () => folder(CHATML_QWEN3, QWEN3_TEMPLATE)],
  ["qwennext", () => folder(CHATML_QWEN3, NEXT_TEMPLATE)],
  [
    "qwen35",
    () =>
      folder(
        [
          { content: "<|endoftext|>", id: 248044 },
          { content: "<|im_start|>", id: 248045 },
          { content: "<|im_end|>", id: 248046 },
        ],
        QWEN3_TEMPLATE,
      ),
  ],
  [
    "nemotron3",
    () =>
      folder(
        ["<|im_start|>", "<|im_end|>"],
        "{% set t = truncate_history_thinking if truncate_history_thinking is defined else true %}" + INSTRUCT_TEMPLATE,
      ),
  ],
  ["llama3", () => folder(["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"])],
  ["gemma3", () => folder(["<bos>", "<start_of_turn>", "<end_of_turn>"])],
  ["default", () => folder(["<s>", "</s>"])],
];

for (const [name, make] of cases)
  test(`${name}: its token set is detected`, () => {
    assert.is(detectFamily(make()), name);
  });

test("DeepSeek tokens without a V3.2/V4 model_type (V3, V3.1, R1) are default, not a guess", () => {
  assert.is(detectFamily(folder(["<｜User｜>", "<｜Assistant｜>"])), "default");
  assert.is(detectFamily(folder(["<｜User｜>", "<｜Assistant｜>"], PLAIN, "deepseek_v3")), "default");
});

test("Qwen3-vocabulary ChatML without thinking (Instruct-2507) and other ChatML are default", () => {
  assert.is(detectFamily(folder(CHATML_QWEN3, INSTRUCT_TEMPLATE)), "default");
  assert.is(detectFamily(folder(["<|im_start|>", "<|im_end|>"], INSTRUCT_TEMPLATE)), "default");
});

test("first match wins: Inkling tokens beside ChatML ones are inkling", () => {
  const both = folder(["<|im_start|>", "<|im_end|>", "<|message_model|>", "<|content_model_end_sampling|>"]);
  assert.is(detectFamily(both), "inkling");
});

test("selectFamily: a name overrides detection; an unknown name lists every family", () => {
  const qwen = folder(CHATML_QWEN3, QWEN3_TEMPLATE);
  assert.is(selectFamily(qwen).name, "qwen3");
  assert.is(selectFamily(qwen, "default").name, "default");
  assert.throws(
    () => selectFamily(qwen, "qwen4"),
    (e: unknown) =>
      e instanceof SessionConfigError &&
      /unknown tito family "qwen4"/.test(e.message) &&
      FAMILY_NAMES.every((n) => e.message.includes(n)),
  );
});

test.run();
