"""A random-weight LFM2 GGUF at LFM2-350M's widths (tests/models/test_lfm2_synthetic.py, later the
LFM2-VL tests): hidden 1024, 16 layers with attention at layers 2, 5, 8, 10, 12, 14 (the
full_attn_idxs of LiquidAI/LFM2-350M's config.json) and short convolutions (L = 3) elsewhere,
16 query / 8 KV heads of 64, feed-forward 4608 (block_ff_dim 6656 through the converter's
auto-adjust: 2/3, rounded up to a multiple of 256), RoPE base 1e6, RMS eps 1e-5. The keys and
tensor names are those llama.cpp's converter writes (conversion/lfm2.py): per-layer
attention.head_count_kv with 0 for conv layers, shortconv.l_cache, blk.N.shortconv.{in_proj,conv,
out_proj}, attn_{q,k}_norm, and token_embd_norm as the final norm. The vocabulary is the small
byte-level one of the qwen3 test plus LFM2's chat markers, with LFM2's ChatML-like template."""
import numpy as np

from synthetic_vocab import byte_vocab

LFM2_350M = dict(n_embd=1024, n_layer=16, n_head=16, n_head_kv=8, n_ff=4608, attn_layers=(2, 5, 8, 10, 12, 14),
                 l_cache=3)

CHAT_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}")


def lfm2_vocab(specials=()):
    """specials: extra control tokens (LFM2-VL's image markers for tests/models/vision)."""
    tokens, types, merges = byte_vocab()
    tokens = tokens + ["<|startoftext|>", "<|im_start|>"] + list(specials)
    types = types + [3, 3] + [3] * len(specials)
    return tokens, types, merges


def write_lfm2(path, seed, dims=LFM2_350M, tied=False, norm_spread=0.1, head_scale=3.0, specials=()):
    """Writes the file; returns n_vocab. Matrices are f32, so both engines read the same numbers.
    The untied output head is scaled so logits spread by ~head_scale (softmax neither flat nor
    one-hot, so log-probabilities and greedy tokens both say something)."""
    import gguf

    rng = np.random.default_rng(seed)
    tokens, types, merges = lfm2_vocab(specials)
    n_vocab = len(tokens)
    e, n_layer, n_head, n_kv, n_ff = dims["n_embd"], dims["n_layer"], dims["n_head"], dims["n_head_kv"], dims["n_ff"]
    head_dim = e // n_head
    attn = set(dims["attn_layers"])
    w = gguf.GGUFWriter(path, "lfm2")
    w.add_context_length(4096)
    w.add_embedding_length(e)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv([n_kv if il in attn else 0 for il in range(n_layer)])
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_shortconv_l_cache(dims["l_cache"])
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("lfm2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|startoftext|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_add_bos_token(True)
    w.add_chat_template(CHAT_TEMPLATE)

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) / np.float32(np.sqrt(cols)))

    def norm(n):
        return (1.0 + norm_spread * rng.standard_normal(n)).astype(np.float32)

    w.add_tensor("token_embd.weight", rng.standard_normal((n_vocab, e), dtype=np.float32))
    if not tied:
        w.add_tensor("output.weight", np.float32(head_scale) * mat(n_vocab, e))
    w.add_tensor("token_embd_norm.weight", norm(e))
    for il in range(n_layer):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", norm(e))
        if il in attn:
            w.add_tensor(p + "attn_q.weight", mat(n_head * head_dim, e))
            w.add_tensor(p + "attn_k.weight", mat(n_kv * head_dim, e))
            w.add_tensor(p + "attn_v.weight", mat(n_kv * head_dim, e))
            w.add_tensor(p + "attn_q_norm.weight", norm(head_dim))
            w.add_tensor(p + "attn_k_norm.weight", norm(head_dim))
            w.add_tensor(p + "attn_output.weight", mat(e, n_head * head_dim))
        else:
            w.add_tensor(p + "shortconv.in_proj.weight", mat(3 * e, e))
            # [n_embd, L] taps; scaled so the convolution mixes neighbours visibly.
            w.add_tensor(p + "shortconv.conv.weight", (0.6 * rng.standard_normal((e, dims["l_cache"]))).astype(np.float32))
            w.add_tensor(p + "shortconv.out_proj.weight", mat(e, e))
        w.add_tensor(p + "ffn_norm.weight", norm(e))
        w.add_tensor(p + "ffn_gate.weight", mat(n_ff, e))
        w.add_tensor(p + "ffn_up.weight", mat(n_ff, e))
        w.add_tensor(p + "ffn_down.weight", mat(e, n_ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return n_vocab
