// The append-only chat template of the inkling family (docs/models.md), as jinja source.
// Every block is `{role token}{author}{kind token}{payload}<|end_message|>`:
//   <|message_system|>tool_declare<|content_xml|>{tool specs}<|end_message|>           (with tools)
//   <|message_system|><|content_text|>{content}<|end_message|>
//   <|message_system|><|content_text|>Thinking effort level: 0.9<|end_message|>   (once, see below)
//   <|message_user|><|content_text|>{content}<|end_message|>
//   assistant: [<|message_model|><|content_thinking|>{reasoning}<|end_message|>]
//              [<|message_model|><|content_text|>{content}<|end_message|>]
//              <|message_model|>{name}<|content_invoke_tool_json|>{"name":…,"args":{…}}<|end_message|>  (per call)
//              <|content_model_end_sampling|>            (only when the turn rendered any block)
//   <|message_tool|>{name}<|content_text|>{content}<|end_message|>
//   generation prompt <|message_model|>
// The effort block goes right before the first non-system message, or after the messages
// when all are system ones (`reasoning_effort` kwarg, a number in [0, 0.99]; default 0.9).
// Tool specs are `{description, name, parameters, type}` per tool and the call arguments
// are canonical JSON: compact, keys sorted by code unit (a recursive macro: tojson's
// sort_keys compares by locale). A tool message's author is its `name`, else the name of
// the last earlier call with its `tool_call_id`. No reasoning is ever dropped, and an
// assistant with nothing to say renders nothing at all (no empty block, no terminator).

export const INKLING_TEMPLATE = `{#- Inkling, append-only (tito-server). -#}
{%- macro canonical(v) -%}
{%- if v is mapping -%}
{{- '{' -}}
{%- for key, item in v | dictsort(true) -%}{{- (key | tojson) ~ ':' ~ canonical(item) -}}{%- if not loop.last -%}{{- ',' -}}{%- endif -%}{%- endfor -%}
{{- '}' -}}
{%- elif v is string -%}{{- v | tojson -}}
{%- elif v is iterable -%}
{{- '[' -}}
{%- for item in v -%}{{- canonical(item) -}}{%- if not loop.last -%}{{- ',' -}}{%- endif -%}{%- endfor -%}
{{- ']' -}}
{%- else -%}{{- v | tojson -}}
{%- endif -%}
{%- endmacro -%}
{%- macro text_blocks(role_token, content) -%}
{%- if content is string -%}
{%- if content -%}{{- role_token ~ '<|content_text|>' ~ content ~ '<|end_message|>' -}}{%- endif -%}
{%- elif content is iterable and content is not mapping -%}
{%- for part in content -%}
{%- if part is string -%}{{- role_token ~ '<|content_text|>' ~ part ~ '<|end_message|>' -}}
{%- elif part is mapping and part.type == 'text' -%}{{- role_token ~ '<|content_text|>' ~ part.text ~ '<|end_message|>' -}}
{%- endif -%}
{%- endfor -%}
{%- endif -%}
{%- endmacro -%}
{%- macro joined_text(content) -%}
{%- if content is string -%}{{- content -}}
{%- elif content is iterable and content is not mapping -%}
{%- for part in content -%}
{%- if part is string -%}{{- part -}}
{%- elif part is mapping and part.type == 'text' -%}{{- part.text -}}
{%- endif -%}
{%- endfor -%}
{%- endif -%}
{%- endmacro -%}
{%- macro assistant_blocks(m) -%}
{%- if m.reasoning_content is string and m.reasoning_content -%}
{{- '<|message_model|><|content_thinking|>' ~ m.reasoning_content ~ '<|end_message|>' -}}
{%- endif -%}
{{- text_blocks('<|message_model|>', m.content) -}}
{%- for call in m.tool_calls or [] -%}
{%- set fn = call.function if call.function is defined else call -%}
{%- set args = fn.arguments if fn.arguments is mapping else {} -%}
{{- '<|message_model|>' ~ fn.name ~ '<|content_invoke_tool_json|>{"name":' ~ (fn.name | tojson) ~ ',"args":' ~ canonical(args) ~ '}<|end_message|>' -}}
{%- endfor -%}
{%- endmacro -%}
{%- macro effort_block() -%}
{%- set effort = reasoning_effort if (reasoning_effort is defined and reasoning_effort is not none) else 0.9 -%}
{%- if effort is not number or effort < 0 or effort > 0.99 -%}
{{- raise_exception('Inkling reasoning_effort must be a number in [0, 0.99]') -}}
{%- endif -%}
{{- '<|message_system|><|content_text|>Thinking effort level: ' ~ ('0.0' if effort == 0 else effort) ~ '<|end_message|>' -}}
{%- endmacro -%}
{%- set roles = {'system': '<|message_system|>', 'user': '<|message_user|>', 'assistant': '<|message_model|>', 'tool': '<|message_tool|>'} -%}
{%- if tools -%}
{%- set decl = namespace(specs=[]) -%}
{%- for tool in tools -%}
{%- set fn = tool.function if tool.function is defined else tool -%}
{%- set decl.specs = decl.specs + [{'description': fn.description or '', 'name': fn.name, 'parameters': fn.parameters or {}, 'type': tool.type or 'function'}] -%}
{%- endfor -%}
{{- '<|message_system|>tool_declare<|content_xml|>' ~ canonical(decl.specs) ~ '<|end_message|>' -}}
{%- endif -%}
{%- set lead = namespace(n=0, open=true) -%}
{%- for m in messages -%}
{%- if lead.open and m.role == 'system' -%}{%- set lead.n = lead.n + 1 -%}{%- else -%}{%- set lead.open = false -%}{%- endif -%}
{%- endfor -%}
{%- for m in messages -%}
{%- if loop.index0 == lead.n -%}{{- effort_block() -}}{%- endif -%}
{%- if m.role not in roles -%}
{{- raise_exception('Inkling has no role ' ~ m.role) -}}
{%- elif m.role == 'tool' -%}
{%- set found = namespace(name='') -%}
{%- for prev in messages[:loop.index0] -%}
{%- if prev.role == 'assistant' and prev.tool_calls -%}
{%- for call in prev.tool_calls -%}
{%- if call.id and call.id == m.tool_call_id -%}
{%- set found.name = call.function.name if call.function is defined else call.name -%}
{%- endif -%}
{%- endfor -%}
{%- endif -%}
{%- endfor -%}
{{- '<|message_tool|>' ~ (m.name or found.name) ~ '<|content_text|>' ~ joined_text(m.content) ~ '<|end_message|>' -}}
{%- elif m.role == 'assistant' -%}
{%- set turn = assistant_blocks(m) -%}
{%- if turn -%}{{- turn ~ '<|content_model_end_sampling|>' -}}{%- endif -%}
{%- else -%}
{{- text_blocks(roles[m.role], m.content) -}}
{%- endif -%}
{%- endfor -%}
{%- if lead.n == messages | length -%}{{- effort_block() -}}{%- endif -%}
{%- if add_generation_prompt -%}{{- '<|message_model|>' -}}{%- endif -%}
`;
