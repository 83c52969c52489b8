"""Chat-template renders vs Python jinja2 configured as transformers' apply_chat_template.

Every template under tests/chat/templates (plus the one inside the SmolLM2 GGUF) is rendered for
a few hundred deterministic conversations by bin/template_probe and by jinja2; the texts must be
byte-identical, and where jinja2 raises, ours must raise too.
"""
import json
import os
import random
import subprocess
from datetime import datetime
from pathlib import Path

import jinja2
import jinja2.ext
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "tests" / "chat" / "templates"
BUILD = os.environ.get("CACTUS_BUILD_DIR", str(REPO / "build"))
PROBE = Path(BUILD) / "bin" / "template_probe"
MODELS = Path(os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models")))
N_CONVERSATIONS = 240


def transformers_env():
    """jinja2 environment exactly as transformers' _compile_jinja_template builds it."""

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


WORDS = ["hello", "world", "Bonjour", "naïve", "日本語", "emoji 🙂", "tab\there", "quote's", 'dq "x"',
         "back\\slash", "<b>tag</b>", "  padded  ", "line1\nline2", "\n\nleading", "trailing\n", "{{ not jinja }}",
         "{% raw %}", "x = 1 + 2", "ümlaut", "Ελληνικά", "∑ math", "", "0", "None", "true"]


def text(rng, max_words=6):
    n = rng.randint(1, max_words)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def json_value(rng, depth=0):
    kind = rng.randint(0, 9 if depth < 2 else 6)
    if kind == 0:
        return rng.randint(-1000, 1000)
    if kind == 1:
        return rng.choice([0.5, -2.25, 1e-7, 1e20, 3.14159, 0.1, 100.0, 1e16, 123456789.125])
    if kind == 2:
        return rng.choice([True, False, None])
    if kind in (3, 4, 5, 6):
        return text(rng, 3)
    if kind in (7, 8):
        return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = ["zeta", "alpha", "mid", "b", "a", "ключ", "long_key_name"]
    rng.shuffle(keys)
    return {k: json_value(rng, depth + 1) for k in keys[: rng.randint(0, 3)]}


def tool_schema(rng, name):
    props = {}
    for pname in rng.sample(["location", "unit", "count", "query", "verbose", "ids"], rng.randint(0, 3)):
        props[pname] = {"type": rng.choice(["string", "integer", "boolean", "array"]), "description": text(rng, 3)}
    function = {"name": name, "description": text(rng, 4),
                "parameters": {"type": "object", "properties": props, "required": list(props)[:1]}}
    if rng.random() < 0.2:
        function["return"] = {"type": "string"}
    return {"type": "function", "function": function}


def call_id(rng):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(rng.choice([9, 9, 9, 5])))


def assistant_message(rng, tool_names):
    content = text(rng)
    if rng.random() < 0.3:
        content = "<think>\n" + text(rng) + "\n</think>\n\n" + content
    msg = {"role": "assistant", "content": content}
    if tool_names and rng.random() < 0.4:
        calls = []
        for _ in range(rng.choice([1, 1, 2])):
            args = {k: json_value(rng) for k in rng.sample(["location", "unit", "count", "query", "z", "a"], rng.randint(0, 3))}
            calls.append({"id": call_id(rng), "type": "function", "function": {"name": rng.choice(tool_names), "arguments": args}})
        msg["tool_calls"] = calls
        if rng.random() < 0.5:
            msg["content"] = ""
    if rng.random() < 0.1:
        msg["reasoning_content"] = text(rng)
    return msg


def conversation(seed):
    rng = random.Random(seed)
    ctx = {"bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": rng.random() < 0.5}
    tool_names = []
    if rng.random() < 0.4:
        tool_names = rng.sample(["get_weather", "search", "calc", "lookup_user"], rng.randint(1, 3))
        ctx["tools"] = [tool_schema(rng, n) for n in tool_names]
    if rng.random() < 0.3:
        ctx["enable_thinking"] = rng.choice([True, False])
    if rng.random() < 0.5:
        ctx["date_string"] = "26 Jul 2024"
    messages = []
    if rng.random() < 0.5:
        messages.append({"role": "system", "content": text(rng)})
    for turn in range(rng.randint(0 if seed % 17 == 0 else 1, 4)):
        messages.append({"role": "user", "content": text(rng)})
        if turn == 0 or rng.random() < 0.8:
            reply = assistant_message(rng, tool_names)
            messages.append(reply)
            for call in reply.get("tool_calls", []):
                result = {"role": "tool", "content": text(rng, 3) if rng.random() < 0.7 else json.dumps(json_value(rng))}
                result["tool_call_id"] = call["id"]
                messages.append(result)
                messages.append({"role": "assistant", "content": text(rng)})
    if rng.random() < 0.08 and messages:  # break the alternation some templates insist on
        messages.append({"role": messages[-1]["role"], "content": text(rng)})
    ctx["messages"] = messages
    return ctx


def load_templates():
    templates = {p.stem: p.read_text() for p in sorted(TEMPLATES.glob("*.jinja"))}
    import gguf

    for key, name in (("gguf_smollm2", "smollm2-135m"), ("gguf_qwen2.5_coder", "qwen2.5-coder-0.5b")):
        gguf_path = MODELS / f"{name}.gguf"
        if not gguf_path.exists():
            pytest.fail(f"model missing: {gguf_path}")
        reader = gguf.GGUFReader(str(gguf_path))
        field = reader.fields["tokenizer.chat_template"]
        templates[key] = bytes(field.parts[field.data[0]]).decode("utf-8")
    return templates


def run_probe(requests):
    if not PROBE.exists():
        pytest.fail(f"probe not built: {PROBE}")
    payload = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in requests)
    proc = subprocess.run([str(PROBE)], input=payload.encode(), capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == len(requests)
    return [json.loads(line) for line in lines]


def jinja_render(env, source, ctx):
    try:
        return {"ok": True, "text": env.from_string(source).render(**ctx)}
    except Exception as exc:  # noqa: BLE001 - any jinja2 failure must be a failure in ours too
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def test_templates_match_jinja2():
    env = transformers_env()
    templates = load_templates()
    contexts = [conversation(seed) for seed in range(N_CONVERSATIONS)]
    requests, expected, labels = [], [], []
    for name, source in templates.items():
        for seed, ctx in enumerate(contexts):
            requests.append({"template": source, "context": ctx})
            expected.append(jinja_render(env, source, ctx))
            labels.append((name, seed))
    got = run_probe(requests)
    mismatches = []
    raised = 0
    for (name, seed), want, have in zip(labels, expected, got):
        raised += not want["ok"]
        same = want["ok"] == have["ok"] and (not want["ok"] or want["text"] == have["text"])
        if not same:
            mismatches.append((name, seed, want, have))
    total = len(requests)
    print(f"\ntemplate oracle: {total - len(mismatches)}/{total} match "
          f"({len(templates)} templates x {N_CONVERSATIONS} conversations, {raised} raise in jinja2)")
    for name, seed, want, have in mismatches[:5]:
        print(f"--- {name} seed {seed}\nwant: {want!r}\nhave: {have!r}")
    assert raised > 0, "no case exercises raise_exception"
    assert not mismatches, f"{len(mismatches)} of {total} renders differ from jinja2"


HAND_WRITTEN = [
    ("{{ x|tojson(indent=2) }}", {"x": {"b": [1, {"c": None}], "a": "é\n"}}),
    ("{% for k, v in d.items() %}{{ loop.index }}{{ k }}={{ v }};{% endfor %}", {"d": {"z": 1, "a": [1, 'x']}}),
    ("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.0 * 3 }}", {}),
    ("{{ 'abc'[::-1] }} {{ [1,2,3,4][1:3] }} {{ 'héllo'[1:3] }}", {}),
    ("{{ none }} {{ true }} {{ [1, 'a', none] }} {{ {'a': 1} }} {{ 1e20 }} {{ 0.1 + 0.2 }}", {}),
    ("{{ x.y }}", {}),
    ("{{ x + 1 }}", {}),
    ("{% for i in range(3) %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}", {}),
    ("  {% if true %}\n  yes\n  {% endif %}\n", {}),
    ("{{- '  a  ' -}}  {#- c -#}  {{ 'b' }}", {}),
    ("{% macro m(a, b='d') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}", {}),
    ("{% set ns = namespace(n=0) %}{% for i in [1,2,3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", {}),
    ("{{ ['b','A','c']|sort|join(',') }} {{ [3,1,2]|max if false else 'x' }}", {}),
    ("{{ 'Hello World'|lower|title }} {{ ' x '|trim }} {{ 'a,b'.split(',') }}", {}),
    ("{{ users|selectattr('age', 'gt', 20)|map(attribute='name')|join('/') }}", {"users": [{"name": "a", "age": 30}, {"name": "b", "age": 10}]}),
    ("{% for x in [] %}a{% else %}empty{% endfor %}", {}),
    ("{{ raise_exception('boom') }}", {}),
    ("{% set x %}inner {{ 1 }}{% endset %}[{{ x }}]", {}),
]


def test_hand_written_constructs_match_jinja2():
    env = transformers_env()
    requests = [{"template": t, "context": c} for t, c in HAND_WRITTEN]
    got = run_probe(requests)
    for (source, ctx), have in zip(HAND_WRITTEN, got):
        want = jinja_render(env, source, ctx)
        assert want["ok"] == have["ok"], (source, want, have)
        if want["ok"]:
            assert want["text"] == have["text"], (source, want, have)


def test_thinking_on_and_off_match_jinja2():
    """Qwen3's enable_thinking flag: on, off and absent render exactly as jinja2 does (off adds the
    empty think block after the generation prompt), with and without tools and tool calls."""
    env = transformers_env()
    source = (TEMPLATES / "qwen3.jinja").read_text()
    requests, expected, flags = [], [], []
    for seed in range(60):
        ctx = conversation(1000 + seed)
        ctx["add_generation_prompt"] = True
        for flag in (True, False, None):
            c = dict(ctx)
            c.pop("enable_thinking", None)
            if flag is not None:
                c["enable_thinking"] = flag
            requests.append({"template": source, "context": c})
            expected.append(jinja_render(env, source, c))
            flags.append(flag)
    got = run_probe(requests)
    empty_block = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    checked = 0
    for flag, want, have in zip(flags, expected, got):
        assert want["ok"] == have["ok"], (want, have)
        if not want["ok"]:
            continue
        assert want["text"] == have["text"]
        assert have["text"].endswith(empty_block) == (flag is False)
        checked += 1
    assert checked > 100
