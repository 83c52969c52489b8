"""The measurement rows of bench/results/history.jsonl: one JSON object per line, one line per
(machine, tier, file, threads, test) measured by a benchmark script.

Fields of a row (docs/PERFORMANCE.md, "Method", lists them for readers):
  date       ISO date and time of the run (UTC where the script knows it)
  commit     cactus commit measured, or null when the run did not record one
  cpu        the CPU, named by cpu_label(): model name, family/model, vCPU count
  tier       the kernel tier (generic, avx2, avx512, amx, neon, ...), or the GPU's name on a device row
  device     "cpu" or "cuda"
  file       the model file (or the workload, for non-model benchmarks)
  quant      the file's quantization as llama.cpp names it, when there is a file
  threads    CPU threads
  test       pp512, tg128, ... (the benchmark's own test name)
  ours       cactus's value
  peer       the peer engine's value on the same test, or null
  peer_name  which peer build ("llama.cpp 0c1e570 native build", "llama-server", ...)
  unit       tok/s, texts/s, fraction, ...
  source     the script that measured it
  extra      everything else the run recorded (samples, bandwidth bound, notes), free form

Scripts call append_rows(); bench/perf_report.py reads load_rows() and renders the tables of
docs/PERFORMANCE.md.
"""
import datetime
import json
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HISTORY = os.path.join(REPO, "bench", "results", "history.jsonl")
FIELDS = ("date", "commit", "cpu", "tier", "device", "file", "quant", "threads", "test", "ours", "peer",
          "peer_name", "unit", "source", "extra")

# The codenames of the CPU families our rows were measured on, for readers of the tables.
CODENAMES = {("AuthenticAMD", 23, 1): "Zen 1", ("AuthenticAMD", 25, 17): "Zen 4", ("AuthenticAMD", 26, 2): "Zen 5",
             ("GenuineIntel", 6, 143): "Sapphire Rapids", ("GenuineIntel", 6, 207): "Emerald Rapids"}
# cactus bench's kernel names (the "kernels:" header) mapped to tiers.
TIERS = {"generic": "generic", "avx2": "avx2", "avx512": "avx512", "avx512_vnni": "avx512", "avx512_amx": "amx",
         "neon": "neon", "neon_dotprod": "neon_dotprod"}


def tier_of(kernels):
    """The tier of a `cactus bench` kernel name (avx512_vnni -> avx512); unknown names pass through."""
    return TIERS.get(kernels, kernels)


def cpu_label(machine):
    """A CPU name for the tables from compare_llama's machine summary (lscpu fields):
    'AMD EPYC (family 26 model 2, Zen 5), 2 vCPU'."""
    name = machine.get("Model name", "unknown CPU").replace("(R)", "").replace(" Processor", "").strip()
    detail = []
    family, model = machine.get("CPU family"), machine.get("Model")
    if family and model and str(family).isdigit() and str(model).isdigit():
        detail.append("family %s model %s" % (family, model))
        codename = CODENAMES.get((machine.get("Vendor ID"), int(family), int(model)))
        if codename:
            detail.append(codename)
    label = "%s (%s)" % (name, ", ".join(detail)) if detail else name
    cpus = machine.get("CPU(s)")
    return "%s, %s vCPU" % (label, cpus) if cpus else label


def lscpu():
    """lscpu's "key: value" lines as a dict (empty where lscpu is missing)."""
    try:
        text = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
    except OSError:
        return {}
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


def local_cpu():
    return cpu_label(lscpu())


def local_tier(isa=None):
    """The tier cactus dispatches to on this CPU (CACTUS_CPU_ISA or isa overrides it), from lscpu flags."""
    isa = isa or os.environ.get("CACTUS_CPU_ISA")
    if isa and isa != "native":
        return tier_of(isa)
    flags = set(lscpu().get("Flags", "").split())
    for flag, tier in (("amx_int8", "amx"), ("avx512_vnni", "avx512"), ("avx2", "avx2"), ("asimddp", "neon_dotprod"),
                       ("asimd", "neon")):
        if flag in flags:
            return tier
    return "generic"


def git_commit():
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                              text=True).stdout.strip() or None
    except OSError:
        return None


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def make_row(**fields):
    """A row with every field present (missing ones null, extra an empty dict), in FIELDS order."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError("history row: unknown fields %s" % sorted(unknown))
    row = {k: fields.get(k) for k in FIELDS}
    row["extra"] = row["extra"] or {}
    return row


def rows_from_llama_compare(doc, source="bench/compare_llama.py", cpu=None):
    """The rows of one bench/compare_llama.py result document: a ppN and a tgN row per model and
    thread count. cpu overrides cpu_label(doc['machine'])."""
    build = doc.get("llama_cpp_build") or {}
    isa = doc.get("isa") or "native"
    peer_name = "llama.cpp %s %s build" % (build.get("build_commit") or "?", "AVX2" if isa == "avx2" else "native")
    out = []
    for r in doc["rows"]:
        kernels = r.get("cactus_kernels") or (doc.get("cactus_kernels") or [None])[0]
        common = dict(date=doc.get("date"), commit=doc.get("cactus_commit") or None,
                      cpu=cpu or cpu_label(doc.get("machine") or {}), tier=tier_of(kernels) if kernels else None,
                      device="cpu", file=r["model"], quant=r.get("quant"), threads=r["threads"],
                      peer_name=peer_name, unit="tok/s", source=source)
        shared = {k: r[k] for k in ("tensor_mix", "reps", "weight_bytes_per_token") if k in r}
        if doc.get("binary_note"):
            shared["note"] = doc["binary_note"]
        ours, theirs = r["ours"], r["llama_cpp"]
        base = r.get("baseline")
        pp = dict(shared, ours_samples=ours.get("pp_samples"), peer_samples=theirs.get("pp_samples"),
                  ttft_ms=ours.get("ttft_ms"), peer_ttft_ms=theirs.get("ttft_ms"))
        tg = dict(shared, ours_samples=ours.get("tg_samples"), peer_samples=theirs.get("tg_samples"))
        for key in ("peak_rss_bytes", "rss_loaded_bytes"):
            if key in ours:
                pp[key] = tg[key] = ours[key]
        bw = r.get("bandwidth")
        if bw:
            tg.update(read_gb_per_s=bw.get("read_gb_per_s"), decode_bound_tps=bw.get("decode_bound_tps"),
                      ours_bound_fraction=bw.get("ours_fraction"), peer_bound_fraction=bw.get("llama_cpp_fraction"))
            if bw.get("read_gb_per_s_samples"):
                tg["read_gb_per_s_samples"] = bw["read_gb_per_s_samples"]
        if base:
            pp.update(baseline_binary=base.get("binary"), baseline=base.get("pp_tps"),
                      baseline_samples=base.get("pp_samples"))
            tg.update(baseline_binary=base.get("binary"), baseline=base.get("tg_tps"),
                      baseline_samples=base.get("tg_samples"))
        out.append(make_row(test="pp%d" % r["n_prompt"], ours=ours["pp_tps"], peer=theirs["pp_tps"],
                            extra=pp, **common))
        out.append(make_row(test="tg%d" % r["n_gen"], ours=ours["tg_tps"], peer=theirs["tg_tps"],
                            extra=tg, **common))
    return out


def append_rows(rows, path=HISTORY):
    """Appends rows (one JSON object per line) to the history file, creating it if needed."""
    rows = [make_row(**r) for r in rows]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        for row in rows:
            f.write(json.dumps(row, sort_keys=False) + "\n")
    return len(rows)


def load_rows(path=HISTORY):
    """Every row of the history file, in file order."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
