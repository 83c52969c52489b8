"""Writes bench/data/spec_greedy_prompts.jsonl: 50 prompts for the greedy-identity check of
speculative decoding (tests/tools/spec_greedy_probe.cpp): 10 small functions x 4 edit requests
(replies that copy their input, so drafts are accepted and rejected) and 10 open questions
(drafts rarely accepted). Deterministic: run it again to regenerate the same file."""
import json
import pathlib

SNIPPETS = [
    ("python", "def mean(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / len(xs)\n"),
    ("python", "def find(items, key):\n    for i, item in enumerate(items):\n        if item == key:\n            return i\n    return -1\n"),
    ("python", "def word_counts(text):\n    counts = {}\n    for word in text.split():\n        w = word.lower()\n        counts[w] = counts.get(w, 0) + 1\n    return counts\n"),
    ("python", "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n        self.items.append(x)\n\n    def pop(self):\n        return self.items.pop()\n"),
    ("c", "int max_of(const int* a, int n) {\n    int best = a[0];\n    for (int i = 1; i < n; ++i)\n        if (a[i] > best) best = a[i];\n    return best;\n}\n"),
    ("c", "void reverse(char* s, int n) {\n    for (int i = 0; i < n / 2; ++i) {\n        char t = s[i];\n        s[i] = s[n - 1 - i];\n        s[n - 1 - i] = t;\n    }\n}\n"),
    ("javascript", "function unique(values) {\n  const seen = new Set();\n  const out = [];\n  for (const v of values) {\n    if (!seen.has(v)) {\n      seen.add(v);\n      out.push(v);\n    }\n  }\n  return out;\n}\n"),
    ("javascript", "function debounce(fn, ms) {\n  let timer = null;\n  return function (...args) {\n    clearTimeout(timer);\n    timer = setTimeout(() => fn.apply(this, args), ms);\n  };\n}\n"),
    ("go", "func Sum(xs []int) int {\n\ttotal := 0\n\tfor _, x := range xs {\n\t\ttotal += x\n\t}\n\treturn total\n}\n"),
    ("go", "func Contains(xs []string, s string) bool {\n\tfor _, x := range xs {\n\t\tif x == s {\n\t\t\treturn true\n\t\t}\n\t}\n\treturn false\n}\n"),
]

EDITS = [
    "Rename the function to have a more descriptive name and output the whole code.",
    "Add comments explaining each step and output the whole code.",
    "Add input validation for empty input and output the whole code.",
    "Rewrite the code with clearer variable names, keeping the logic the same. Output the whole code.",
]

QUESTIONS = [
    "What is the capital of France? Answer in one sentence.",
    "Explain what a hash table is in three sentences.",
    "Write a haiku about autumn rain.",
    "Give three tips for writing readable code.",
    "What is the difference between a process and a thread?",
    "Describe the water cycle briefly.",
    "Why is the sky blue? Keep it short.",
    "Suggest a name for a coffee shop run by robots.",
    "What does HTTP status code 404 mean?",
    "List four uses of a binary search.",
]


def main():
    rows = []
    for s, (lang, code) in enumerate(SNIPPETS):
        for e, edit in enumerate(EDITS):
            text = f"{edit}\n```{lang}\n{code}```"
            rows.append({"id": f"edit-{s}-{e}", "kind": "edit", "messages": [{"role": "user", "content": text}]})
    for q, question in enumerate(QUESTIONS):
        rows.append({"id": f"chat-{q}", "kind": "chat", "messages": [{"role": "user", "content": question}]})
    out = pathlib.Path(__file__).resolve().parent / "data" / "spec_greedy_prompts.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(rows)} prompts -> {out}")


if __name__ == "__main__":
    main()
