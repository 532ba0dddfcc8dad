// The append-only chat template of the MiniMax M2.5 / M2.7 families (docs/models.md), as
// jinja source: the models' own layout, plus a `clear_thinking` switch (default true: keep
// the reasoning only of assistants after the last user message, as the models' template
// does; the family pins false so a new user turn never rewrites earlier turns).
//   ]~!b[]~b]system\n{first system message, else the identity sentence}{tools section}[e~[\n
//   ]~b]user\n{content}[e~[\n
//   ]~b]ai\n[<think>\n{reasoning}\n</think>\n\n]{content}[\n<minimax:tool_call>\n<invoke name="N">\n
//     <parameter name="K">V</parameter>\n…</invoke>\n</minimax:tool_call>][e~[\n
//   ]~b]tool\n<response>{c1}</response>\n<response>{c2}</response>[e~[\n   (one header per run)
//   generation prompt ]~b]ai\n<think>\n
// A system message after the first is dropped (hence no system appends). An assistant with
// no reasoning_content has its reasoning re-split from the content at `</think>` (the
// `minimax-append-think` parser leaves it there), newlines around both parts stripped.
// @huggingface/jinja's strip() takes no characters, so the newline-only strip is a macro.

const TOOLS_HEADER =
  "\\n\\n# Tools\\nYou may call one or more tools to assist with the user query.\\n" +
  "Here are the tools available in JSONSchema format:\\n\\n<tools>\\n";
const TOOLS_FOOTER =
  "</tools>\\n\\nWhen making tool calls, use XML format to invoke tools and pass parameters:\\n" +
  '\\n<minimax:tool_call>\\n<invoke name="tool-name-1">\\n' +
  '<parameter name="param-key-1">param-value-1</parameter>\\n' +
  '<parameter name="param-key-2">param-value-2</parameter>\\n...\\n</invoke>\\n</minimax:tool_call>';

/** The template of one model; `identity` is the default system text (it names the model). */
export function minimaxTemplate(model: "MiniMax-M2.5" | "MiniMax-M2.7"): string {
  const identity = `You are a helpful assistant. Your name is ${model} and is built by MiniMax.`;
  return `{#- ${model}, append-only (tito-server): the model's layout plus clear_thinking. -#}
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
{%- macro strip_newlines(s) -%}
{%- set lead = s|length - s.lstrip()|length -%}
{%- set tail = s.rstrip()|length -%}
{%- set cut = namespace(first=lead, last=tail) -%}
{%- for i in range(lead) -%}{%- if s[i] != '\\n' and cut.first == lead -%}{%- set cut.first = i -%}{%- endif -%}{%- endfor -%}
{%- for i in range(tail, s|length) -%}{%- if s[i] != '\\n' -%}{%- set cut.last = i + 1 -%}{%- endif -%}{%- endfor -%}
{{- s[cut.first:cut.last] -}}
{%- endmacro -%}
{%- set ns = namespace(last_user=-1, called=false) -%}
{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}{%- endfor -%}
{%- set keep_all_thinking = clear_thinking is defined and not clear_thinking -%}
{{- ']~!b[]~b]system\\n' -}}
{%- set system_text = visible_text(messages[0].content) if messages and messages[0].role == 'system' else '' -%}
{%- if system_text -%}{{- system_text -}}
{%- elif model_identity is defined -%}{{- model_identity -}}
{%- else -%}{{- '${identity}' -}}
{%- endif -%}
{%- if tools -%}
{{- '${TOOLS_HEADER}' -}}
{%- for tool in tools -%}{{- '<tool>' ~ ((tool.function if tool.function is defined else tool) | tojson) ~ '</tool>\\n' -}}{%- endfor -%}
{{- '${TOOLS_FOOTER}' -}}
{%- endif -%}
{{- '[e~[\\n' -}}
{%- for m in messages -%}
{%- if m.role == 'user' -%}
{{- ']~b]user\\n' ~ visible_text(m.content) ~ '[e~[\\n' -}}
{%- elif m.role == 'assistant' -%}
{%- set content = visible_text(m.content) -%}
{%- set reasoning = '' -%}
{%- if m.reasoning_content is string -%}
{%- set reasoning = m.reasoning_content -%}
{%- elif '</think>' in content -%}
{%- set reasoning = strip_newlines(content.split('</think>')[0].split('<think>')[-1]) -%}
{%- set content = strip_newlines(content.split('</think>')[-1]) -%}
{%- endif -%}
{{- ']~b]ai\\n' -}}
{%- if reasoning and (keep_all_thinking or loop.index0 > ns.last_user) -%}
{{- '<think>\\n' ~ reasoning ~ '\\n</think>\\n\\n' -}}
{%- endif -%}
{{- content -}}
{%- if m.tool_calls -%}
{{- '\\n<minimax:tool_call>\\n' -}}
{%- for call in m.tool_calls -%}
{%- set fn = call.function if call.function is defined else call -%}
{{- '<invoke name="' ~ fn.name ~ '">\\n' -}}
{%- for key, value in fn.arguments.items() -%}
{{- '<parameter name="' ~ key ~ '">' ~ (value if value is string else value | tojson) ~ '</parameter>\\n' -}}
{%- endfor -%}
{{- '</invoke>\\n' -}}
{%- endfor -%}
{{- '</minimax:tool_call>' -}}
{%- set ns.called = true -%}
{%- else -%}
{%- set ns.called = false -%}
{%- endif -%}
{{- '[e~[\\n' -}}
{%- elif m.role == 'tool' -%}
{%- if not ns.called -%}
{{- raise_exception('Message has tool role, but there was no previous assistant message with a tool call!') -}}
{%- endif -%}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- ']~b]tool' -}}{%- endif -%}
{{- '\\n<response>' ~ visible_text(m.content) ~ '</response>' -}}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '[e~[\\n' -}}{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- ']~b]ai\\n<think>\\n' -}}{%- endif -%}
`;
}
