"""Checks our GGUF reader against the independent `gguf` Python package (gguf-py's GGUFReader).

The probe bin/gguf_dump prints what our reader sees (metadata keys, types and values, tensor
name/type/dims/offset/size and a CRC-32 of each tensor's bytes); we compare it with GGUFReader's
view of the same file. GGUFReader's view is cached as JSON under
~/.cache/cactus/oracle/fixtures/ keyed by the model file's size and mtime.
"""
import json
import os
import subprocess
import zlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("CACTUS_BUILD_DIR", REPO / "build"))
MODELS = Path(os.environ.get("CACTUS_MODELS", os.path.expanduser("~/.cache/cactus/models")))
FIXTURES = Path(os.path.expanduser("~/.cache/cactus/oracle/fixtures"))

MODEL_FILES = ["smollm2-135m.gguf", "gemma3-270m.gguf"]

# gguf-py GGUFValueType ids -> the names gguf_dump prints (cactus::gguf_type_name).
TYPE_NAMES = {0: "u8", 1: "i8", 2: "u16", 3: "i16", 4: "u32", 5: "i32", 6: "f32", 7: "bool",
              8: "string", 9: "array", 10: "u64", 11: "i64", 12: "f64"}
FLOATS = {"f32", "f64"}


def _scalar(type_name, part):
    if type_name == "string":
        return bytes(part).hex()
    if type_name in FLOATS:
        return float(part[0])
    if type_name == "bool":
        return bool(part[0])
    return int(part[0])


def _oracle_field(field):
    main = TYPE_NAMES[int(field.types[0])]
    if main != "array":
        return {"type": main, "value": _scalar(main, field.parts[field.data[0]])}
    sub = TYPE_NAMES[int(field.types[-1])]
    values = [_scalar(sub, field.parts[i]) for i in field.data]
    return {"type": "array", "array_type": sub, "values": values}


def _oracle_dump(path):
    from gguf import GGUFReader  # the independent implementation

    reader = GGUFReader(str(path))
    metadata = {name: _oracle_field(field) for name, field in reader.fields.items()
                if not name.startswith("GGUF.")}
    tensors = [{
        "name": t.name,
        "type": int(t.tensor_type),
        "dims": [int(d) for d in t.shape],
        "offset": int(t.data_offset) - int(reader.data_offset),
        "n_elements": int(t.n_elements),
        "n_bytes": int(t.n_bytes),
        "crc32": zlib.crc32(t.data.tobytes()),
    } for t in reader.tensors]
    version = int(reader.fields["GGUF.version"].parts[0][0])
    return {"version": version, "alignment": int(reader.alignment),
            "data_offset": int(reader.data_offset), "metadata": metadata, "tensors": tensors}


def _cached_oracle(path):
    st = path.stat()
    fixture = FIXTURES / f"gguf_reader_{path.stem}_{st.st_size}_{int(st.st_mtime)}.json"
    if fixture.exists():
        return json.loads(fixture.read_text())
    dumped = _oracle_dump(path)
    FIXTURES.mkdir(parents=True, exist_ok=True)
    tmp = fixture.with_suffix(".tmp")
    tmp.write_text(json.dumps(dumped))
    tmp.replace(fixture)
    return json.loads(json.dumps(dumped))  # same int/float normalisation as a cache hit


def _ours(path):
    probe = BUILD / "bin" / "gguf_dump"
    assert probe.exists(), f"{probe} not built (set CACTUS_BUILD_DIR)"
    out = subprocess.run([str(probe), str(path)], capture_output=True)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    return json.loads(out.stdout)


def _same_number(a, b):
    if a is None or b is None:  # NaN prints as null in JSON
        return a is None and (b is None or b != b)
    return a == b


def _compare_values(key, ours, oracle):
    assert ours["type"] == oracle["type"], key
    if ours["type"] != "array":
        assert _same_number(ours["value"], oracle["value"]) if oracle["type"] in FLOATS \
            else ours["value"] == oracle["value"], key
        return
    assert ours["array_type"] == oracle["array_type"], key
    assert len(ours["values"]) == len(oracle["values"]), key
    if oracle["array_type"] in FLOATS:
        bad = [i for i, (a, b) in enumerate(zip(ours["values"], oracle["values"])) if not _same_number(a, b)]
        assert not bad, f"{key}: first difference at {bad[:5]}"
    else:
        assert ours["values"] == oracle["values"], key


@pytest.mark.parametrize("model", MODEL_FILES)
def test_reader_matches_gguf_py(model):
    path = MODELS / model
    assert path.exists(), f"model file missing: {path}"
    ours = _ours(path)
    oracle = _cached_oracle(path)

    assert ours["version"] == oracle["version"]
    assert ours["alignment"] == oracle["alignment"]
    assert ours["data_offset"] == oracle["data_offset"]
    assert sorted(ours["metadata"]) == sorted(oracle["metadata"])
    for key, value in oracle["metadata"].items():
        _compare_values(key, ours["metadata"][key], value)

    assert len(ours["tensors"]) == len(oracle["tensors"]) > 0
    for a, b in zip(ours["tensors"], oracle["tensors"]):
        for field in ("name", "type", "dims", "offset", "n_elements", "n_bytes", "crc32"):
            assert a[field] == b[field], f"tensor {b['name']}: {field} {a[field]} != {b[field]}"


@pytest.mark.parametrize("cut,expected", [
    (4096, ["tensor count", "cannot fit"]),           # header cut: 272 tensor infos cannot fit
    (20_000_000, ["tensor 'token_embd.weight'", "past end of file"]),  # data section cut
])
def test_probe_rejects_a_truncated_model(tmp_path, cut, expected):
    """The probe reports our reader's error, naming the field, for a truncated copy of a model."""
    with open(MODELS / MODEL_FILES[0], "rb") as f:
        head = f.read(cut)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(head)
    probe = BUILD / "bin" / "gguf_dump"
    out = subprocess.run([str(probe), str(bad)], capture_output=True)
    assert out.returncode == 1
    message = out.stderr.decode()
    assert message.startswith("gguf: "), message
    for part in expected:
        assert part in message, message
