#!/usr/bin/python3
"""The engine side of the cross-check (issue 39): renders a chat request with Python's jinja2
set up as transformers sets it up for chat templates, after preparing the messages as SGLang
does, and prints the text. One JSON request per stdin line, one JSON answer per stdout line.

Written for this project from the upstream facts (nothing pasted):
- transformers, src/transformers/utils/chat_template_utils.py (huggingface/transformers@5e43e2e8),
  `_compile_jinja_template`: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
  extensions=[loopcontrols]); filter `tojson` = json.dumps(x, ensure_ascii=False, indent=None,
  separators=None, sort_keys=False); globals `raise_exception` (raises TemplateError) and
  `strftime_now` (datetime.now().strftime); rendered with messages, tools, documents,
  add_generation_prompt and the template kwargs (the special tokens among them).
- SGLang, python/sglang/srt/entrypoints/openai/serving_chat.py `_apply_jinja_template` and
  python/sglang/srt/parser/jinja_template_utils.py (sgl-project/sglang@0b9c3848): content None
  becomes ""; the template's content format is "openai" when its text names
  image/audio/video/vision or a for loop iterates message/msg/m `.content`, else "string";
  "string" joins a list's text parts with " " (an empty list is ""), "openai" keeps
  {"type": "text", "text": ...} parts; keys whose value is None are left out; an assistant's
  tool-call `arguments` given as a string is read as JSON.

Request line: {"template": str, "body": str (the HTTP request body, read here with json.loads),
"add_generation_prompt": bool, "context": {…extra render variables: special tokens, kwargs…},
"helpers": [names of tito's newline-strip helpers to define]}.
Answer line: {"text": str} or {"error": str}.
"""

import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


def _raise(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _now(fmt):
    return datetime.now().strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = _now
    return env


ENV = environment()
COMPILED = {}


def _reads(node, owner, key):
    """`owner.key` / `owner['key']`, possibly under filters, tests or a slice."""
    if isinstance(node, (jinja2.nodes.Filter, jinja2.nodes.Test)):
        return node.node is not None and _reads(node.node, owner, key)
    if isinstance(node, jinja2.nodes.Getitem) and isinstance(node.arg, jinja2.nodes.Slice):
        return _reads(node.node, owner, key)
    base = getattr(node, "node", None)
    if not (isinstance(base, jinja2.nodes.Name) and base.ctx == "load" and base.name == owner):
        return False
    if isinstance(node, jinja2.nodes.Getattr):
        return node.attr == key
    if isinstance(node, jinja2.nodes.Getitem):
        return isinstance(node.arg, jinja2.nodes.Const) and node.arg.value == key
    return False


def content_format(source):
    if any(word in source for word in ("image", "audio", "video", "vision")):
        return "openai"
    try:
        tree = ENV.parse(source)
    except jinja2.TemplateError:
        return "string"
    for loop in tree.find_all(jinja2.nodes.For):
        if any(_reads(loop.iter, owner, "content") for owner in ("message", "msg", "m")):
            return "openai"
    return "string"


def _on_text(strip):
    return lambda value: strip(value) if isinstance(value, str) else value


# tito's render context adds these (sessions/chat-template.ts, NEWLINE_STRIPS): Python's
# lstrip('\n'), rstrip('\n') and strip('\n'), which its fixed Qwen3-family templates call.
HELPERS = {
    "lstrip_nl": _on_text(lambda s: s.lstrip("\n")),
    "rstrip_nl": _on_text(lambda s: s.rstrip("\n")),
    "strip_nl": _on_text(lambda s: s.strip("\n")),
}


def prepare(message, fmt):
    message = dict(message)
    if message.get("content") is None:
        message["content"] = ""
    content = message["content"]
    if isinstance(content, list):
        texts = [p["text"] for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text")]
        if fmt == "string":
            message["content"] = " ".join(texts) if texts else ""
        else:
            message["content"] = [{"type": "text", "text": t} for t in texts]
    message = {k: v for k, v in message.items() if v is not None}
    if message.get("role") == "assistant" and isinstance(message.get("tool_calls"), list):
        for call in message["tool_calls"]:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                fn["arguments"] = json.loads(fn["arguments"])
    return message


def render(request):
    source = request["template"]
    if source not in COMPILED:
        COMPILED[source] = (ENV.from_string(source), content_format(source))
    template, fmt = COMPILED[source]
    body = json.loads(request["body"])
    messages = [prepare(m, fmt) for m in body["messages"]]
    tools = body.get("tools") or None
    variables = {name: HELPERS[name] for name in request.get("helpers") or []}
    variables.update(request.get("context") or {})
    variables.update(body.get("chat_template_kwargs") or {})
    return template.render(
        messages=messages,
        tools=tools,
        documents=None,
        add_generation_prompt=request["add_generation_prompt"],
        **variables,
    )


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = {"text": render(json.loads(line))}
        except Exception as err:  # the answer names any failure; the caller decides
            answer = {"error": f"{type(err).__name__}: {err}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
