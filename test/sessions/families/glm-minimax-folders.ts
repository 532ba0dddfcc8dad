// Synthetic tokenizer folders of GLM-4.7 and MiniMax M2.x (no npm package ships them): their
// control tokens as added tokens, and a chat template in each model's own format. The GLM
// template plays the model's HF template (the glm47 family renders with the folder's
// template), with its clear_thinking switch; the MiniMax one only has to name the model
// (the families ship their own template; detection reads the identity sentence).
import type { TokenizerFolder } from "../../../sessions/tokenizer-folder.ts";
import { syntheticFolder, type AddedToken } from "../../helpers/synthetic-tokenizer.ts";

/** GLM-4.7's layout: no newline after role tokens, no end-of-turn token, `<|observation|>` once per tool run. */
export const GLM47_TEMPLATE = `
{%- macro text_of(c) -%}
{%- if c is string -%}{{- c -}}
{%- elif c is iterable and c is not mapping -%}{%- for p in c -%}{%- if p is mapping and p.type == 'text' -%}{{- p.text -}}{%- elif p is string -%}{{- p -}}{%- endif -%}{%- endfor -%}
{%- elif c is not none -%}{{- c -}}
{%- endif -%}
{%- endmacro -%}
{{- '[gMASK]<sop>' -}}
{%- if tools -%}
{{- '<|system|>\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\\n' -}}
{%- for tool in tools -%}{{- (tool | tojson) ~ '\\n' -}}{%- endfor -%}
{{- '</tools>\\n\\nFor each function call, output the function name and arguments within the following XML format:\\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value>...</tool_call>' -}}
{%- endif -%}
{%- set ns = namespace(last_user=-1) -%}
{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}{%- endfor -%}
{%- for m in messages -%}
{%- if m.role == 'system' -%}{{- '<|system|>' ~ text_of(m.content) -}}
{%- elif m.role == 'user' -%}{{- '<|user|>' ~ text_of(m.content) -}}
{%- elif m.role == 'assistant' -%}
{%- set content = text_of(m.content) -%}
{%- set reasoning = '' -%}
{%- if m.reasoning_content is string -%}{%- set reasoning = m.reasoning_content -%}
{%- elif '</think>' in content -%}
{%- set reasoning = content.split('</think>')[0].split('<think>')[-1] -%}
{%- set content = content.split('</think>')[-1] -%}
{%- endif -%}
{{- '<|assistant|>' -}}
{%- if reasoning and ((clear_thinking is defined and not clear_thinking) or loop.index0 > ns.last_user) -%}
{{- '<think>' ~ reasoning.strip() ~ '</think>' -}}
{%- else -%}{{- '</think>' -}}
{%- endif -%}
{{- content.strip() -}}
{%- if m.tool_calls -%}
{%- for call in m.tool_calls -%}
{%- set fn = call.function if call.function is defined else call -%}
{{- '<tool_call>' ~ fn.name -}}
{%- for k, v in fn.arguments.items() -%}{{- '<arg_key>' ~ k ~ '</arg_key><arg_value>' ~ (v if v is string else v | tojson) ~ '</arg_value>' -}}{%- endfor -%}
{{- '</tool_call>' -}}
{%- endfor -%}
{%- endif -%}
{%- elif m.role == 'tool' -%}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|observation|>' -}}{%- endif -%}
{{- '<tool_response>' ~ text_of(m.content) ~ '</tool_response>' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>' ~ ('</think>' if enable_thinking is defined and not enable_thinking else '<think>') -}}{%- endif -%}
`;

const GLM_SPECIAL = ["<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"];
const GLM_CONTENT = [
  "<think>",
  "</think>",
  "<tool_call>",
  "</tool_call>",
  "<arg_key>",
  "</arg_key>",
  "<arg_value>",
  "</arg_value>",
  "<tool_response>",
  "</tool_response>",
];

/** A GLM-4.7 folder; `specialThink` flags `<think>`/`</think>` special (unknown for the real tokenizer). */
export function glm47Folder(options: { specialThink?: boolean; without?: string } = {}): TokenizerFolder {
  const added: AddedToken[] = [
    ...GLM_SPECIAL.map((content) => ({ content })),
    ...GLM_CONTENT.map((content) => ({
      content,
      special: options.specialThink === true && (content === "<think>" || content === "</think>"),
    })),
  ].filter((t) => t.content !== options.without);
  return syntheticFolder({
    added,
    template: GLM47_TEMPLATE,
    config: { eos_token: "<|endoftext|>", pad_token: "<|endoftext|>" },
    merges: ["s u", "su n", "sun n", "sunn y"],
  });
}

const MINIMAX_SPECIAL = ["]~!b[", "]~b]", "[e~["];
const MINIMAX_CONTENT = ["<think>", "</think>", "<minimax:tool_call>", "</minimax:tool_call>"];

/** A MiniMax M2.x folder whose own template names `model` (the identity sentence detection reads). */
export function minimaxFolder(model: "MiniMax-M2.5" | "MiniMax-M2.7", without?: string): TokenizerFolder {
  const added: AddedToken[] = [
    ...MINIMAX_SPECIAL.map((content) => ({ content })),
    ...MINIMAX_CONTENT.map((content) => ({ content, special: false })),
  ].filter((t) => t.content !== without);
  const template =
    "{{- ']~!b[]~b]system\\n' -}}{{- 'You are a helpful assistant. Your name is " +
    model +
    " and is built by MiniMax.' -}}{{- '[e~[\\n' -}}" +
    "{%- for m in messages -%}{{- ']~b]' ~ m.role ~ '\\n' ~ m.content ~ '[e~[\\n' -}}{%- endfor -%}" +
    "{%- if add_generation_prompt -%}{{- ']~b]ai\\n<think>\\n' -}}{%- endif -%}";
  return syntheticFolder({ added, template, config: { eos_token: "[e~[" } });
}
