"""Every file the reference docs cite exists in the repository: the relative links of README.md,
DEVELOPING.md and docs/*.md, and every repository path they name in text (`src/...`, `docs/X.md`,
`scripts/...`, `tests/...`, ...). A doc that names a moved or deleted file fails here, so the docs
follow the code. Section names after a path (`docs/PERFORMANCE.md, "Method"`) are not checked;
globs (`src/backends/cpu_backend*.cpp`) and brace lists (`src/core/utf8.{h,cpp}`) must match."""
import glob
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = ["README.md", "DEVELOPING.md"] + sorted(
    os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs", "*.md")))

# Top-level folders of the repository whose paths the docs cite in text.
ROOTS = ("bench", "cmake", "docs", "examples", "include", "python", "scripts", "src", "tests", "tools")
# A path in text: starts a word (not inside ~/x, ../x or /abs/x), a root folder, then path characters.
PATH_IN_TEXT = re.compile(r"(?<![\w./~-])((?:%s)/[\w.*{},/-]*)" % "|".join(ROOTS))
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_FENCE = re.compile(r"^```")


def expand_braces(path):
    """src/core/utf8.{h,cpp} -> [src/core/utf8.h, src/core/utf8.cpp] (one brace group)."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [path[:m.start()] + part + path[m.end():] for part in m.group(1).split(",")]


def exists(path):
    path = path.rstrip("/")
    if any(c in path for c in "*?["):
        return bool(glob.glob(os.path.join(REPO, path)))
    return os.path.exists(os.path.join(REPO, path))


def clean(token):
    token = re.sub(r":\d+(-\d+)?$", "", token)  # file:line
    token = token.rstrip(".,;:")
    if token.count("{") != token.count("}"):  # a brace that closes after the path (prose)
        token = token.split("{")[0]
    return token


def cited_paths(doc):
    """(line number, path) for every relative link and repository path in `doc`."""
    base = os.path.dirname(doc)
    out = []
    with open(os.path.join(REPO, doc), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            for target in MARKDOWN_LINK.findall(line):
                if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                    continue  # a URL or an anchor in the same page
                target = target.split("#")[0]
                out.append((n, os.path.normpath(os.path.join(base, target))))
            for token in PATH_IN_TEXT.findall(line):
                token = clean(token)
                if token.endswith("/...") or "..." in token or token.count("/") == 0:
                    continue
                for p in expand_braces(token):
                    out.append((n, p))
    return out


@pytest.mark.parametrize("doc", DOCS)
def test_cited_paths_exist(doc):
    if not os.path.exists(os.path.join(REPO, doc)):
        pytest.fail("%s is missing" % doc)
    missing = list(dict.fromkeys("%s:%d: %s" % (doc, n, p) for n, p in cited_paths(doc) if not exists(p)))
    assert not missing, "cited but not in the repository:\n" + "\n".join(missing)


def test_the_checker_sees_paths_links_globs_and_braces():
    text = ("see `src/core/utf8.{h,cpp}` and [OPS](docs/OPS.md#tiers), src/backends/cpu_backend*.cpp: "
            "also ~/.cache/cactus/models and ../shared/x.md and https://example.com/src/a.cpp")
    tokens = [clean(t) for t in PATH_IN_TEXT.findall(text)]
    assert tokens == ["src/core/utf8.{h,cpp}", "docs/OPS.md", "src/backends/cpu_backend*.cpp"]
    assert expand_braces(tokens[0]) == ["src/core/utf8.h", "src/core/utf8.cpp"]
    assert [t.split("#")[0] for t in MARKDOWN_LINK.findall(text)] == ["docs/OPS.md"]
