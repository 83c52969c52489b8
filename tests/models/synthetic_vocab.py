"""The vocabulary of the synthetic qwen3 files (tests/models/test_qwen3_synthetic.py and
scripts/check_transformers.py): no dependency beyond the standard library."""


def byte_vocab():
    """GPT-2 byte-level vocabulary (256 symbols), a few merges, and two control tokens."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    symbols = [chr(c) for c in cs]
    merges = ["Ġ t", "h e", "Ġ a", "i n"]
    tokens = symbols + [m.replace(" ", "") for m in merges] + ["<|endoftext|>", "<|im_end|>"]
    types = [1] * (len(tokens) - 2) + [3, 3]
    return tokens, types, merges
