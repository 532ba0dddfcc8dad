// The append-only chat template of the qwen35 family (Qwen3.5, docs/models.md), as jinja
// source: the model's layout plus a `clear_thinking` switch (true, the default, keeps the
// model's rule — a think block only for assistants after the last real user query —; the
// family pins false so every assistant keeps `<think>\n{reasoning}\n</think>\n\n`).
//   <|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n{tool json per line}\n</tools>
//     \n\n{XML call instructions}[\n\n{first system, trimmed}]<|im_end|>\n     (with tools)
//   <|im_start|>system\n{first system, trimmed}<|im_end|>\n                   (without)
//   <|im_start|>user\n{content, trimmed}<|im_end|>\n
//   <|im_start|>assistant\n<think>\n{reasoning, trimmed}\n</think>\n\n{content, trimmed}
//     [\n\n if content]<tool_call>\n<function=N>\n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call>
//     [\n<tool_call>…]<|im_end|>\n
//   <|im_start|>user\n<tool_response>\n{c1}\n</tool_response>\n<tool_response>\n{c2}\n</tool_response><|im_end|>\n
//   generation prompt <|im_start|>assistant\n<think>\n, or …<think>\n\n</think>\n\n with enable_thinking=false
// A system message anywhere but first raises, as the model's template does (hence no
// system appends). Argument values: strings as they are, anything else as JSON. Image and
// video parts render as the model's vision placeholders.

const TEXT_OF = String.raw`
{%- macro text_of(content) -%}
{%- if content is string -%}{{- content -}}
{%- elif content is iterable and content is not mapping -%}
{%- for part in content -%}
{%- if part is string -%}{{- part -}}
{%- elif part.type == 'image' or part.type == 'image_url' -%}{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}
{%- elif part.type == 'video' -%}{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}
{%- elif part.text is string -%}{{- part.text -}}
{%- endif -%}
{%- endfor -%}
{%- elif content is not none -%}{{- content|string -}}
{%- endif -%}
{%- endmacro -%}
`;

const CALL_INSTRUCTIONS =
  "\\n\\nIf you choose to call a function ONLY reply in the following format with NO suffix:\\n\\n" +
  "<tool_call>\\n<function=example_function_name>\\n<parameter=example_parameter_1>\\nvalue_1\\n</parameter>\\n" +
  "<parameter=example_parameter_2>\\nThis is the value for the second parameter\\nthat can span\\nmultiple lines\\n" +
  "</parameter>\\n</function>\\n</tool_call>\\n\\n<IMPORTANT>\\nReminder:\\n" +
  "- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested " +
  "within <tool_call></tool_call> XML tags\\n- Required parameters MUST be specified\\n" +
  "- You may provide optional reasoning for your function call in natural language BEFORE the function call, " +
  "but NOT after\\n- If there is no function call available, answer the question like normal with your current " +
  "knowledge and do not tell the user about function calls\\n</IMPORTANT>";

const BODY = String.raw`
{%- set keep_thinking = clear_thinking is defined and clear_thinking is false -%}
{%- if not messages -%}{{- raise_exception('No messages provided.') -}}{%- endif -%}
{%- set system_text = (text_of(messages[0].content) | trim) if messages[0].role == 'system' else '' -%}
{%- if tools -%}
{{- '<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>' -}}
{%- for tool in tools -%}{{- '\n' + (tool | tojson) -}}{%- endfor -%}
{{- '\n</tools>' + "${CALL_INSTRUCTIONS}" -}}
{%- if system_text -%}{{- '\n\n' + system_text -}}{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- elif messages[0].role == 'system' -%}
{{- '<|im_start|>system\n' + system_text + '<|im_end|>\n' -}}
{%- endif -%}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) -%}
{%- for message in messages[::-1] -%}
{%- if ns.multi_step_tool and message.role == 'user' -%}
{%- set text = text_of(message.content) | trim -%}
{%- if not (text.startswith('<tool_response>') and text.endswith('</tool_response>')) -%}
{%- set ns.multi_step_tool = false -%}
{%- set ns.last_query_index = (messages|length - 1) - loop.index0 -%}
{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- for message in messages -%}
{%- set content = text_of(message.content) | trim -%}
{%- if message.role == 'system' -%}
{%- if not loop.first -%}{{- raise_exception('System message must be at the beginning.') -}}{%- endif -%}
{%- elif message.role == 'user' -%}
{{- '<|im_start|>user\n' + content + '<|im_end|>\n' -}}
{%- elif message.role == 'assistant' -%}
{%- set reasoning = '' -%}
{%- if message.reasoning_content is string -%}
{%- set reasoning = message.reasoning_content -%}
{%- elif '</think>' in content -%}
{%- set reasoning = lstrip_nl(rstrip_nl(content.split('</think>')[0]).split('<think>')[-1]) -%}
{%- set content = lstrip_nl(content.split('</think>')[-1]) -%}
{%- endif -%}
{%- if keep_thinking or loop.index0 > ns.last_query_index -%}
{{- '<|im_start|>assistant\n<think>\n' + (reasoning | trim) + '\n</think>\n\n' + content -}}
{%- else -%}
{{- '<|im_start|>assistant\n' + content -}}
{%- endif -%}
{%- if message.tool_calls -%}
{%- for call in message.tool_calls -%}
{%- set fn = call.function if call.function else call -%}
{%- if not loop.first -%}{{- '\n' -}}{%- elif content | trim -%}{{- '\n\n' -}}{%- endif -%}
{{- '<tool_call>\n<function=' + fn.name + '>\n' -}}
{%- if fn.arguments is mapping -%}
{%- for key, value in fn.arguments.items() -%}
{{- '<parameter=' + key + '>\n' + (value if value is string else value | tojson) + '\n</parameter>\n' -}}
{%- endfor -%}
{%- endif -%}
{{- '</function>\n</tool_call>' -}}
{%- endfor -%}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- elif message.role == 'tool' -%}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
{{- '\n<tool_response>\n' + content + '\n</tool_response>' -}}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
{%- else -%}
{{- raise_exception('Unexpected message role.') -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\n\n</think>\n\n' -}}
{%- else -%}{{- '<think>\n' -}}
{%- endif -%}
{%- endif -%}
`;

export const QWEN35_TEMPLATE = `{#- Qwen3.5, append-only (tito-server) -#}${TEXT_OF}${BODY}`.trim();
