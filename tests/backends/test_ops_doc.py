"""docs/OPS.md must be what scripts/gen_ops_doc.py writes from the built probe (bin/backend_caps).

    CACTUS_BUILD_DIR=build python3 -m pytest -q tests/backends/test_ops_doc.py

The op table is compared on every machine (the CUDA column is compiled in without a GPU); the CPU
tier tables only where the machine runs every tier of the build (else that part is skipped with
the reason).
"""
import importlib.util
import os
import platform

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build"))


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_ops_doc", os.path.join(REPO, "scripts", "gen_ops_doc.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated():
    gen = load_generator()
    if not os.path.exists(os.path.join(BUILD_DIR, "bin", "backend_caps")):
        pytest.skip(f"{BUILD_DIR}/bin/backend_caps is not built")
    caps = gen.probe(BUILD_DIR)
    with open(gen.DOC, encoding="utf-8") as f:
        doc = f.read()
    return gen, caps, doc


def section(text, start, end=None):
    a = text.index(start)
    b = text.index(end, a) if end else len(text)
    return text[a:b]


def test_op_table_matches_the_backends_answers(generated):
    gen, caps, doc = generated
    title = "## Which backend runs which op on which type"
    assert section(gen.render(caps), title, "## CPU kernel tiers") == section(doc, title, "## CPU kernel tiers"), (
        "docs/OPS.md is out of date: run python3 scripts/gen_ops_doc.py"
    )


def test_cpu_tier_tables_match_the_kernel_tables(generated):
    gen, caps, doc = generated
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("docs/OPS.md lists the x86-64 tiers; this machine is " + platform.machine())
    if not gen.tiers_complete(caps):
        ran = [t["name"] for t in caps["cpu_tiers"]]
        pytest.skip(f"this machine runs the CPU tiers {ran} of {caps['cpu_tiers_compiled']}")
    assert gen.render(caps) == doc, "docs/OPS.md is out of date: run python3 scripts/gen_ops_doc.py"


def test_every_op_runs_f32_on_every_backend(generated):
    gen, caps, _ = generated
    for backend, ops in caps["backends"].items():
        for op in caps["ops"]:
            if op in gen.OPERAND:  # its weight, table or KV rows may be of other types
                continue
            assert ops[op] == ["F32"], f"{backend} {op}"
