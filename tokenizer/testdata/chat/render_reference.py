#!/usr/bin/python3
"""Render the golden outputs for tokenizer's chat-template tests.

Python's Jinja2 is the reference implementation: Hugging Face transformers
renders `tokenizer.chat_template` with it, and vLLM calls transformers. This
script sets Jinja2 up the way transformers' `apply_chat_template` does
(ImmutableSandboxedEnvironment, trim_blocks and lstrip_blocks on, the
loopcontrols extension, transformers' own `tojson`, `raise_exception` and
`strftime_now`) and renders every template in templates/ for every case in
cases.json. For each pair it writes golden/<template>.<case>.txt with the
exact prompt text, or golden/<template>.<case>.err with Python's error when
the template refuses the conversation (the Go test then expects an error too).

It also renders the small templates in snippets.json, each exercising one
Python-ism that chat templates rely on, into golden/snippets.json.

Run it from anywhere with Debian's Python and python3-jinja2:

    apt-get install -y python3-jinja2
    /usr/bin/python3 tokenizer/testdata/chat/render_reference.py

It needs nothing else and never touches the network.
"""

import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(HERE, "templates")
GOLDEN = os.path.join(HERE, "golden")


def make_env(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    def strftime_now(fmt):
        return now.strftime(fmt)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def vllm_messages(messages):
    """Shape OpenAI chat messages as vLLM hands them to the template.

    vLLM's chat_utils (string content format): text parts are joined with
    "\n" and a null content becomes ""; an assistant message keeps its
    tool_calls (with function.arguments parsed from the JSON string into a
    dict, {} when empty) and reasoning_content; a tool message keeps
    tool_call_id; name is kept when it is a string. Key order: role,
    content, tool_calls, reasoning_content, tool_call_id, name.
    """
    out = []
    for m in messages:
        content = m.get("content")
        if content is None:
            content = ""
        elif not isinstance(content, str):
            content = "\n".join(p["text"] for p in content if p.get("type") == "text")
        r = {"role": m["role"], "content": content}
        if m["role"] == "assistant":
            if m.get("tool_calls") is not None:
                calls = json.loads(json.dumps(m["tool_calls"]))
                for c in calls:
                    args = c["function"].get("arguments")
                    if args:
                        if not isinstance(args, (dict, list)):
                            c["function"]["arguments"] = json.loads(args)
                    else:
                        c["function"]["arguments"] = {}
                r["tool_calls"] = calls
            if m.get("reasoning_content") is not None:
                r["reasoning_content"] = m["reasoning_content"]
        elif m["role"] == "tool":
            if "tool_call_id" in m:
                r["tool_call_id"] = m["tool_call_id"]
        if isinstance(m.get("name"), str):
            r["name"] = m["name"]
        out.append(r)
    return out


def continue_final(text, final):
    """Cut the rendered chat after the final message, as transformers'
    apply_chat_template(continue_final_message=True) does: at the last
    place the stripped content appears, keeping the message's trailing
    whitespace only where the template kept it."""
    if final.strip() not in text:
        raise ValueError("continue_final_message: the final message does not appear in the rendered chat")
    loc = text.rindex(final.strip())
    if text[loc : loc + len(final.lstrip())] == final:
        return text[: loc + len(final.lstrip())]
    return text[: loc + len(final.strip())]


def main():
    with open(os.path.join(HERE, "cases.json"), encoding="utf-8") as f:
        spec = json.load(f)
    now = datetime.datetime.strptime(spec["now"], "%Y-%m-%dT%H:%M:%SZ")
    env = make_env(now)

    os.makedirs(GOLDEN, exist_ok=True)
    for name in os.listdir(GOLDEN):
        if name.endswith(".txt") or name.endswith(".err"):
            os.remove(os.path.join(GOLDEN, name))

    ok = failed = 0
    for file in sorted(os.listdir(TEMPLATES)):
        if not file.endswith(".jinja"):
            continue
        base = file[: -len(".jinja")]
        with open(os.path.join(TEMPLATES, file), encoding="utf-8") as f:
            source = f.read()
        template = env.from_string(source)
        for case in spec["cases"]:
            out = os.path.join(GOLDEN, "%s.%s" % (base, case["name"]))
            try:
                variables = dict(case.get("kwargs") or {})
                variables.update(
                    messages=vllm_messages(case["messages"]),
                    tools=case.get("tools"),
                    documents=case.get("documents"),
                    add_generation_prompt=case["add_generation_prompt"],
                    bos_token=spec["bos_token"],
                    eos_token=spec["eos_token"],
                )
                text = template.render(**variables)
                if case.get("continue_final_message"):
                    text = continue_final(text, variables["messages"][-1]["content"])
            except Exception as e:  # noqa: BLE001 - any refusal is recorded
                with open(out + ".err", "w", encoding="utf-8", newline="") as f:
                    f.write("%s: %s\n" % (type(e).__name__, e))
                failed += 1
                continue
            with open(out + ".txt", "w", encoding="utf-8", newline="") as f:
                f.write(text)
            ok += 1
    print("rendered %d, refused %d" % (ok, failed), file=sys.stderr)

    with open(os.path.join(HERE, "snippets.json"), encoding="utf-8") as f:
        snippets = json.load(f)
    results = {}
    for name, source in sorted(snippets["snippets"].items()):
        try:
            text = env.from_string(source).render(
                messages=snippets["messages"],
                tools=None,
                documents=None,
                add_generation_prompt=True,
                bos_token=spec["bos_token"],
                eos_token=spec["eos_token"],
            )
            results[name] = {"out": text}
        except Exception as e:  # noqa: BLE001
            results[name] = {"error": "%s: %s" % (type(e).__name__, e)}
    with open(os.path.join(GOLDEN, "snippets.json"), "w", encoding="utf-8", newline="") as f:
        json.dump(results, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")
    print("snippets: %d" % len(results), file=sys.stderr)


if __name__ == "__main__":
    main()
