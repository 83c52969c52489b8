#!/usr/bin/env python3
"""Prints docs/SERVER.md's "Flags (llama-server)" table from the one list of llama-server's flags,
tools/server/llama_flags.cpp (kLlamaFlags): used flags one per row, ignored and refused flags
grouped by their reason."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
src = open(os.path.join(ROOT, "tools", "server", "llama_flags.cpp")).read()
consts = {name: "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', body))
          for name, body in re.findall(r'constexpr const char\* (k\w+) =((?:\s*"(?:[^"\\]|\\.)*")+);', src)}
row_re = re.compile(r'\{"([^"]*)", "([^"]*)", (nullptr|"[^"]*"), Takes::(\w+), Does::(\w+),\s*(k\w+|(?:\s*"(?:[^"\\]|\\.)*")+)\}')


def text(what):
    if what.startswith("k"):
        return consts[what]
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', what)).replace("\\'", "'")


def spelled(names, negations, takes):
    value = {"Value": " V", "MaybeValue": " [V]", "TwoValues": " A B"}.get(takes, "")
    shown = "`" + "`, `".join(names.split(",")) + "`" + value
    return shown + (" / `" + "`, `".join(negations.split(",")) + "`" if negations else "")


def env_of(env, negations):
    if env == "nullptr":
        return ""
    env = env.strip('"')
    twin = env.replace("LLAMA_ARG_", "LLAMA_ARG_NO_", 1) if negations and env.startswith("LLAMA_ARG_") else ""
    return "`%s`" % env + (" (`%s`)" % twin if twin else "")


used, grouped = [], {}
for names, negations, env, takes, does, what in row_re.findall(src):
    if does == "Ours":
        used.append((spelled(names, negations, takes), env_of(env, negations), "`" + text(what).replace("|", "` / `") + "`"))
    else:
        grouped.setdefault((does, text(what)), []).append((spelled(names, negations, takes), env_of(env, negations)))

print("| llama-server flag | variable | here |")
print("|---|---|---|")
for flag, env, ours in used:
    print("| %s | %s | used: %s |" % (flag, env, ours))
for (does, reason), rows in sorted(grouped.items(), key=lambda kv: kv[0][0] == "Refuse"):
    flags = "; ".join(f for f, _ in rows)
    envs = ", ".join(e for _, e in rows if e)
    print("| %s | %s | %s: %s |" % (flags, envs, "ignored (notice)" if does == "Ignore" else "**refused** (exit 2)",
                                    reason.replace("|", "\\|")))
