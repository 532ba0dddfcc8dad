// The append-only chat template of the kimi25 family (docs/models.md), as jinja source:
// Kimi K2.5's layout plus a `preserve_thinking` switch, which K2.6's own template has and
// K2.5's lacks. Without it (default false), every assistant up to and including the last
// one without tool calls is rendered with an empty think block: a final answer rewrites
// the earlier turns' reasoning. The family pins it true.
//   <|im_system|>tool_declare<|im_middle|>{tools as compact JSON}<|im_end|>      (with tools)
//   <|im_system|>{name or 'system'}<|im_middle|>{content}<|im_end|>
//   <|im_user|>{name or 'user'}<|im_middle|>{content}<|im_end|>
//   <|im_assistant|>{name or 'assistant'}<|im_middle|><think>{reasoning}</think>{content}
//     [<|tool_calls_section_begin|><|tool_call_begin|>{id}<|tool_call_argument_begin|>{args JSON}
//     <|tool_call_end|>…<|tool_calls_section_end|>]<|im_end|>
//   <|im_system|>{name or 'tool'}<|im_middle|>## Return of {tool_call_id}\n{content}<|im_end|>
//   generation prompt <|im_assistant|>assistant<|im_middle|><think>  (`thinking=false`: <think></think>)
// Nothing follows <|im_end|>. Call ids are printed verbatim, so they must be the model's own
// (`functions.NAME:IDX`). Arguments are compact JSON (a string that is not JSON, verbatim).

export const KIMI_K25_TEMPLATE = `{#- Kimi K2.5, append-only (tito-server): the model's layout plus preserve_thinking. -#}
{%- macro visible_text(content) -%}
{%- if content is string -%}{{- content -}}
{%- elif content is iterable and content is not mapping -%}
{%- for part in content -%}
{%- if part is string -%}{{- part -}}
{%- elif part is mapping and part.type == 'text' -%}{{- part.text -}}
{%- endif -%}
{%- endfor -%}
{%- elif content is not none -%}{{- content -}}
{%- endif -%}
{%- endmacro -%}
{%- macro header(m) -%}
{%- set name = m.name or m.role -%}
{%- if m.role == 'user' -%}{{- '<|im_user|>' ~ name ~ '<|im_middle|>' -}}
{%- elif m.role == 'assistant' -%}{{- '<|im_assistant|>' ~ name ~ '<|im_middle|>' -}}
{%- else -%}{{- '<|im_system|>' ~ name ~ '<|im_middle|>' -}}
{%- endif -%}
{%- endmacro -%}
{%- set ns = namespace(blank_until=-1) -%}
{%- if not (preserve_thinking is defined and preserve_thinking) -%}
{%- for m in messages -%}
{%- if m.role == 'assistant' and not m.tool_calls -%}{%- set ns.blank_until = loop.index0 -%}{%- endif -%}
{%- endfor -%}
{%- endif -%}
{%- if tools -%}
{{- '<|im_system|>tool_declare<|im_middle|>' ~ (tools | tojson(separators=(',', ':'))) ~ '<|im_end|>' -}}
{%- endif -%}
{%- for m in messages -%}
{{- header(m) -}}
{%- if m.role == 'assistant' -%}
{%- set reasoning = m.reasoning_content if (m.reasoning_content is string and loop.index0 > ns.blank_until) else '' -%}
{{- '<think>' ~ reasoning ~ '</think>' ~ visible_text(m.content) -}}
{%- if m.tool_calls -%}
{{- '<|tool_calls_section_begin|>' -}}
{%- for call in m.tool_calls -%}
{%- set fn = call.function if call.function is defined else call -%}
{%- set args = fn.arguments if fn.arguments is string else (fn.arguments | tojson(separators=(',', ':'))) -%}
{{- '<|tool_call_begin|>' ~ call.id ~ '<|tool_call_argument_begin|>' ~ args ~ '<|tool_call_end|>' -}}
{%- endfor -%}
{{- '<|tool_calls_section_end|>' -}}
{%- endif -%}
{%- elif m.role == 'tool' -%}
{{- '## Return of ' ~ m.tool_call_id ~ '\\n' ~ visible_text(m.content) -}}
{%- else -%}
{{- visible_text(m.content) -}}
{%- endif -%}
{{- '<|im_end|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_assistant|>assistant<|im_middle|>' -}}
{%- if thinking is defined and thinking is false -%}{{- '<think></think>' -}}{%- else -%}{{- '<think>' -}}{%- endif -%}
{%- endif -%}
`;
