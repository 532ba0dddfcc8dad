// The llama3 family's fixed chat template: Meta's Llama 3.1 layout, written so that
// appending messages never changes text already rendered. Facts and the reasons for each
// difference from Meta's own template are in llama3.ts's header.

/** Jinja source; `bos_token` and the kwargs come from the render context. */
export const LLAMA3_TEMPLATE = String.raw`{#- tito-server llama3: Llama 3.1 layout, append-only. -#}
{{- bos_token }}
{%- if date_string is not defined %}{%- set date_string = "26 Jul 2024" %}{%- endif %}
{%- if tools is not defined %}{%- set tools = none %}{%- endif %}
{%- set rest = messages %}
{%- set system_text = "" %}
{%- if messages | length > 0 and messages[0].role == "system" %}
  {%- set system_text = messages[0].content | trim %}
  {%- set rest = messages[1:] %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if tools is not none %}{{- "Environment: ipython\n" }}{%- endif %}
{{- "Cutting Knowledge Date: December 2023\nToday Date: " + date_string + "\n\n" }}
{{- system_text + "<|eot_id|>" }}
{%- if tools is not none %}
  {%- if rest | length == 0 or rest[0].role != "user" %}
    {{- raise_exception("llama3: the tool list goes into the first user message, and there is none") }}
  {%- endif %}
  {{- "<|start_header_id|>user<|end_header_id|>\n\n" }}
  {{- "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n" }}
  {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n' }}
  {%- for tool in tools %}{{- tool | tojson(indent=4) + "\n\n" }}{%- endfor %}
  {{- rest[0].content | trim + "<|eot_id|>" }}
  {%- set rest = rest[1:] %}
{%- endif %}
{%- for message in rest %}
  {%- if message.role == "tool" or message.role == "ipython" %}
    {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
    {%- if message.content is string %}{{- message.content }}{%- else %}{{- message.content | tojson }}{%- endif %}
    {{- "<|eot_id|>" }}
  {%- elif message.role == "assistant" and message.tool_calls %}
    {{- "<|start_header_id|>assistant<|end_header_id|>\n\n" }}
    {%- set text = message.content | trim %}
    {%- if text %}{{- text + "<|python_tag|>" }}{%- endif %}
    {%- for call in message.tool_calls %}
      {%- set fn = call.function if call.function is defined else call %}
      {%- if not loop.first %}{{- ";" }}{%- endif %}
      {{- '{"name": ' + fn.name | tojson + ', "parameters": ' + fn.arguments | tojson + "}" }}
    {%- endfor %}
    {{- "<|eot_id|>" }}
  {%- else %}
    {{- "<|start_header_id|>" + message.role + "<|end_header_id|>\n\n" + message.content | trim + "<|eot_id|>" }}
  {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- "<|start_header_id|>assistant<|end_header_id|>\n\n" }}{%- endif %}`;
