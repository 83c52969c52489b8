"""spec_replay_probe replays recorded replies through speculative decoding with a modelled step
cost (docs/SPECULATIVE.md): a reply that copies its prompt runs faster than plain, one that copies
nothing runs at plain speed, and no policy beats the oracle."""
import json
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = os.path.join(os.environ.get("CACTUS_BUILD_DIR", os.path.join(REPO, "build")), "bin", "spec_replay_probe")


def replay(tmp_path, records, *args):
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = subprocess.run([PROBE, "replay", str(path), "--unit-ms", "0.3", *args], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return {row["id"]: row for row in map(json.loads, out.stdout.splitlines())}


def test_copies_run_faster_than_plain_and_new_text_at_plain_speed(tmp_path):
    passage = [100 + (7 * i) % 127 for i in range(120)]  # 120 distinct ids: each suffix occurs once
    fresh = [300 + i for i in range(120)]
    rows = replay(tmp_path, [
        {"id": "copy", "kind": "edit", "prompt": [1, 2] + passage + [3], "reply": passage},
        {"id": "fresh", "kind": "chat", "prompt": [1, 2] + passage + [3], "reply": fresh},
    ])
    copy, new = rows["copy"], rows["fresh"]
    assert copy["tokens"] == 120 and new["tokens"] == 120
    # The 1-thread AVX2 cost table: a whole copy verified 16 at a time is at best ~2.4x plain.
    assert 1.5 < copy["speedup"] <= copy["oracle"] * 1.02 and copy["oracle"] < 2.6
    assert copy["acceptance"] > 0.9 and copy["tokens_per_step"] > 4
    assert new["oracle"] == 1.0 and 0.95 < new["speedup"] < 1.05 and new["tokens_per_step"] == 1.0


def test_cheaper_verification_raises_the_speedup(tmp_path):
    passage = [100 + (7 * i) % 127 for i in range(120)]
    record = {"id": "copy", "kind": "edit", "prompt": [1, 2] + passage + [3], "reply": passage}
    costly = replay(tmp_path, [record])["copy"]
    cheap = replay(tmp_path, [record], "--costs", "2:1.05,17:1.8")["copy"]
    assert cheap["oracle"] > costly["oracle"] + 1 and cheap["speedup"] > costly["speedup"]


def test_bad_cost_table_is_a_clear_error(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text("")
    out = subprocess.run([PROBE, "replay", str(path), "--costs", "2-1.3"], capture_output=True, text=True)
    assert out.returncode == 2 and "is not N:X" in out.stderr
