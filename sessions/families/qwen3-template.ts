// The append-only chat templates of the qwen3 and qwennext families (docs/models.md),
// as jinja source. The models' own layout, with three changes that keep every rendering a
// prefix of the next one:
//   * no `loop.last` case: the stock template writes an empty think block for an assistant
//     only while it is the last message, so appending anything rewrote that assistant;
//   * a `clear_thinking` switch: true (the default) keeps the stock rule (a think block only
//     for assistants after the last real user query, and only when they have reasoning);
//     false, which the families pin, gives every assistant `<think>\n{reasoning}\n</think>\n\n`
//     (empty reasoning included), so a new user turn never rewrites earlier turns;
//   * content that is not a string (a list of text parts, a number) renders as text.
// The layout, otherwise the stock template's:
//   [<|im_start|>system\n{first system}\n\n# Tools …<tools>\n{tool json per line}\n</tools>… <|im_end|>\n]
//   <|im_start|>user\n{content}<|im_end|>\n          (a later system message the same way)
//   <|im_start|>assistant\n[<think>\n{reasoning}\n</think>\n\n]{content}[\n<tool_call>\n{json}\n</tool_call>…]<|im_end|>\n
//   <|im_start|>user\n<tool_response>\n{c1}\n</tool_response>\n<tool_response>\n{c2}\n</tool_response><|im_end|>\n
//   generation prompt: qwen3 `<|im_start|>assistant\n` (+ `<think>\n\n</think>\n\n` with
//   enable_thinking=false); qwennext `<|im_start|>assistant\n<think>\n` always.
// Python's strip('\n') strips newlines only; @huggingface/jinja's strip() takes no argument
// and strips all whitespace, so the newline-only strips (lstrip_nl, rstrip_nl, strip_nl)
// are functions every render's context provides (chat-template.ts, shared with Qwen3.5's).

const TEXT_OF = String.raw`
{%- macro text_of(content) -%}
{%- if content is string -%}{{- content -}}
{%- elif content is mapping -%}{{- content.text if content.text is string else '' -}}
{%- elif content is iterable -%}
{%- for part in content -%}
{%- if part is string -%}{{- part -}}
{%- elif part is mapping and part.text is string -%}{{- part.text -}}
{%- endif -%}
{%- endfor -%}
{%- elif content is not none -%}{{- content|string -}}
{%- endif -%}
{%- endmacro -%}
`;

const TOOLS_INTRO =
  "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n" +
  "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>";
const TOOLS_OUTRO =
  "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments " +
  'within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, ' +
  '\\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n';

const BODY = String.raw`
{%- set keep_thinking = clear_thinking is defined and clear_thinking is false -%}
{%- if tools -%}
{{- '<|im_start|>system\n' -}}
{%- if messages[0].role == 'system' -%}{{- text_of(messages[0].content) + '\n\n' -}}{%- endif -%}
{{- "${TOOLS_INTRO}" -}}
{%- for tool in tools -%}{{- '\n' + (tool | tojson) -}}{%- endfor -%}
{{- "${TOOLS_OUTRO}" -}}
{%- elif messages[0].role == 'system' -%}
{{- '<|im_start|>system\n' + text_of(messages[0].content) + '<|im_end|>\n' -}}
{%- endif -%}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) -%}
{%- for message in messages[::-1] -%}
{%- if ns.multi_step_tool and message.role == 'user' -%}
{%- set text = text_of(message.content) -%}
{%- if not (text.startswith('<tool_response>') and text.endswith('</tool_response>')) -%}
{%- set ns.multi_step_tool = false -%}
{%- set ns.last_query_index = (messages|length - 1) - loop.index0 -%}
{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- for message in messages -%}
{%- set content = text_of(message.content) -%}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) -%}
{{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>\n' -}}
{%- elif message.role == 'assistant' -%}
{%- set reasoning = '' -%}
{%- if message.reasoning_content is string -%}
{%- set reasoning = message.reasoning_content -%}
{%- elif '</think>' in content -%}
{%- set reasoning = lstrip_nl(rstrip_nl(content.split('</think>')[0]).split('<think>')[-1]) -%}
{%- set content = lstrip_nl(content.split('</think>')[-1]) -%}
{%- endif -%}
{%- if keep_thinking or (loop.index0 > ns.last_query_index and reasoning) -%}
{{- '<|im_start|>assistant\n<think>\n' + strip_nl(reasoning) + '\n</think>\n\n' + lstrip_nl(content) -}}
{%- else -%}
{{- '<|im_start|>assistant\n' + content -}}
{%- endif -%}
{%- if message.tool_calls -%}
{%- for call in message.tool_calls -%}
{%- if content or not loop.first -%}{{- '\n' -}}{%- endif -%}
{%- set fn = call.function if call.function else call -%}
{{- '<tool_call>\n{"name": "' + fn.name + '", "arguments": ' -}}
{%- if fn.arguments is string -%}{{- fn.arguments -}}{%- else -%}{{- fn.arguments | tojson -}}{%- endif -%}
{{- '}\n</tool_call>' -}}
{%- endfor -%}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- elif message.role == 'tool' -%}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
{{- '\n<tool_response>\n' + content + '\n</tool_response>' -}}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
{%- endif -%}
{%- endfor -%}
`;

const QWEN3_PROMPT = String.raw`
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\n\n</think>\n\n' -}}{%- endif -%}
{%- endif -%}
`;

const THINKING_PROMPT = String.raw`
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n<think>\n' -}}{%- endif -%}
`;

/** Qwen3 hybrid thinking (the enable_thinking switch). */
export const QWEN3_TEMPLATE = `{#- Qwen3, append-only (tito-server) -#}${TEXT_OF}${BODY}${QWEN3_PROMPT}`.trim();

/** Qwen3-Thinking-2507 / Qwen3-Next-Thinking: the generation prompt always opens the think block. */
export const QWENNEXT_TEMPLATE =
  `{#- Qwen3 Thinking-2507 / Next, append-only (tito-server) -#}${TEXT_OF}${BODY}${THINKING_PROMPT}`.trim();
