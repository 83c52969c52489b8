#!/usr/bin/env python3
"""Writes src/tokenizer/unicode_bert_tables.cpp: the Unicode facts the WordPiece (BERT) tokenizer
needs, taken from Python's unicodedata. Run by hand (the table names the Unicode versions it was
made from):

  python3 -m pip download --no-deps --no-binary :all: -d /tmp/ud2 unicodedata2==8.0.0
  tar xzf /tmp/ud2/unicodedata2-8.0.0.tar.gz -C /tmp/ud2
  python3 scripts/gen_unicode_tables.py /tmp/ud2/unicodedata2-8.0.0/unicodedata2/unicodedata_db.h \
      > src/tokenizer/unicode_bert_tables.cpp

General categories (control, punctuation, nonspacing mark) are Unicode 8.0's: tokenizers reads
them from the unicode_categories crate, whose tables are Unicode 8.0, so a character assigned
later (U+07FD, U+1E944) or recategorised since (U+166D Po -> So, U+1734 Mn -> Mc) keeps its 8.0
category there. Python's own unicodedata is newer, so the categories come from the 8.0 table of
the unicodedata2 8.0.0 sdist (its generated C header, parsed here; the package no longer builds).
Lowercase (Rust's std) and NFD (unicode-normalization) follow current Unicode, so they come from
the running Python's unicodedata.

The classes follow Hugging Face tokenizers' BertNormalizer and BertPreTokenizer:
- control: categories Cc, Cf, Co (Rust's is_other in the unicode_categories crate, less the
  unassigned Cn, which tokenizers keeps: "a\\u0378b" is one word there); tab, LF and CR are
  whitespace instead.
- whitespace: Rust's char::is_whitespace (the White_Space property), plus tab, LF and CR.
  U+001C..U+001F are whitespace to Python's str.isspace but not to Rust, so the list is written
  out here instead of derived.
- punctuation: categories P* (ASCII symbols such as $ + < = > ^ ` | ~ are added in code).
- nonspacing marks: category Mn (stripped after NFD).
- lowercase: str.lower() of each single character (Rust's char::to_lowercase, no final-sigma
  context). U+0130 is the one character with a longer lowercase; NFD splits it first, so it
  never reaches the lowercase step.
- NFD: the full canonical decomposition of each character (Hangul syllables are decomposed in
  code, algorithmically).
"""
import re
import sys
import unicodedata

MAX_CP = 0x110000

# Rust's char::is_whitespace: the White_Space property.
WHITE_SPACE = [
    (0x0009, 0x000D), (0x0020, 0x0020), (0x0085, 0x0085), (0x00A0, 0x00A0), (0x1680, 0x1680),
    (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
]


def is_hangul_syllable(cp):
    return 0xAC00 <= cp <= 0xD7A3


def ranges(predicate):
    out, start = [], None
    for cp in range(MAX_CP):
        if predicate(cp):
            if start is None:
                start = cp
        elif start is not None:
            out.append((start, cp - 1))
            start = None
    if start is not None:
        out.append((start, MAX_CP - 1))
    return out


class CategoryTable:
    """General categories from a unicodedata_db.h that CPython's makeunicodedata.py generated:
    records (category index first), category names, and the two-level index over SHIFT bits."""

    def __init__(self, path):
        text = open(path, encoding="utf-8").read()
        self.version = re.search(r'#define UNIDATA_VERSION "([^"]+)"', text).group(1)
        records = re.search(r"_PyUnicode_Database_Records\[\] = \{(.*?)\n\};", text, re.S).group(1)
        self.records = [int(m.group(1)) for m in re.finditer(r"\{(\d+),", records)]
        names = re.search(r"_PyUnicode_CategoryNames\[\] = \{(.*?)\};", text, re.S).group(1)
        self.names = re.findall(r'"([^"]*)"', names)
        self.shift = int(re.search(r"#define SHIFT (\d+)", text).group(1))
        self.index1 = self._array(text, "index1")
        self.index2 = self._array(text, "index2")

    @staticmethod
    def _array(text, name):
        body = re.search(r"static unsigned \w+ " + name + r"\[\] = \{(.*?)\};", text, re.S).group(1)
        return [int(v) for v in re.findall(r"\d+", body)]

    def category(self, cp):
        index = self.index1[cp >> self.shift]
        index = self.index2[(index << self.shift) + (cp & ((1 << self.shift) - 1))]
        return self.names[self.records[index]]


CATEGORIES = None  # set in main()


def category(cp):
    return CATEGORIES.category(cp)


def lowercase_runs():
    """Runs of characters whose lowercase is one character at a fixed distance, spaced by a
    fixed stride (1 for blocks such as A-Z, 2 for alternating upper/lower pairs)."""
    pairs = []
    for cp in range(MAX_CP):
        lower = chr(cp).lower()
        if lower == chr(cp):
            continue
        if len(lower) != 1:
            assert unicodedata.normalize("NFD", chr(cp)) != chr(cp), hex(cp)
            continue
        pairs.append((cp, ord(lower) - cp))
    runs = []
    i = 0
    while i < len(pairs):
        first, delta = pairs[i]
        stride, count = 1, 1
        if i + 1 < len(pairs) and pairs[i + 1][1] == delta and pairs[i + 1][0] - first in (1, 2):
            stride = pairs[i + 1][0] - first
            while (i + count < len(pairs) and pairs[i + count][1] == delta
                   and pairs[i + count][0] == first + count * stride):
                count += 1
        runs.append((first, count, stride, delta))
        i += count
    return runs


def decompositions():
    entries, pool = [], []
    for cp in range(MAX_CP):
        if is_hangul_syllable(cp) or 0xD800 <= cp <= 0xDFFF:
            continue
        nfd = unicodedata.normalize("NFD", chr(cp))
        if nfd == chr(cp):
            continue
        entries.append((cp, len(pool), len(nfd)))
        pool.extend(ord(c) for c in nfd)
    return entries, pool


def write_rows(out, cells, per_line):
    for i in range(0, len(cells), per_line):
        out.write("    " + " ".join(cells[i:i + per_line]) + "\n")


def write_ranges(out, name, items):
    out.write(f"const CodepointRange {name}[] = {{\n")
    write_rows(out, [f"{{0x{first:X}, 0x{last:X}}}," for first, last in items], 6)
    out.write("};\n")
    out.write(f"const size_t {name}Count = sizeof({name}) / sizeof({name}[0]);\n\n")


def main():
    global CATEGORIES
    if len(sys.argv) != 2:
        sys.exit("usage: gen_unicode_tables.py UNICODEDATA_DB_H  (see the docstring)")
    CATEGORIES = CategoryTable(sys.argv[1])
    assert CATEGORIES.version == "8.0.0", CATEGORIES.version
    assert category(0x41) == "Lu" and category(0x1734) == "Mn" and category(0x10FFFF) == "Cn"
    out = sys.stdout
    out.write(f"// Generated by scripts/gen_unicode_tables.py: general categories of Unicode {CATEGORIES.version}\n"
              f"// (as tokenizers' unicode_categories crate), lowercase and NFD of Unicode {unicodedata.unidata_version}\n"
              "// (Python's unicodedata); do not edit.\n")
    out.write('#include "tokenizer/unicode_bert.h"\n\n// clang-format off\n')
    out.write("namespace cactus {\nnamespace bert_unicode {\n\n")
    write_ranges(out, "kWhitespace", WHITE_SPACE)
    write_ranges(out, "kControl", ranges(lambda cp: category(cp) in ("Cc", "Cf", "Co") and cp not in (9, 10, 13)))
    write_ranges(out, "kPunctuation", ranges(lambda cp: category(cp).startswith("P")))
    write_ranges(out, "kNonspacingMark", ranges(lambda cp: category(cp) == "Mn"))

    out.write("const CaseRun kLowercase[] = {\n")
    write_rows(out, [f"{{0x{f:X}, {n}, {s}, {d}}}," for f, n, s, d in lowercase_runs()], 5)
    out.write("};\nconst size_t kLowercaseCount = sizeof(kLowercase) / sizeof(kLowercase[0]);\n\n")

    entries, pool = decompositions()
    out.write("const Decomposition kDecompositions[] = {\n")
    write_rows(out, [f"{{0x{cp:X}, {offset}, {length}}}," for cp, offset, length in entries], 6)
    out.write("};\nconst size_t kDecompositionsCount = sizeof(kDecompositions) / sizeof(kDecompositions[0]);\n\n")
    out.write("const uint32_t kDecompositionPool[] = {\n")
    write_rows(out, [f"0x{c:X}," for c in pool], 14)
    out.write("};\n\n}  // namespace bert_unicode\n}  // namespace cactus\n// clang-format on\n")


if __name__ == "__main__":
    main()
