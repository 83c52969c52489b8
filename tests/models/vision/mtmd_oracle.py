"""llama.cpp's libmtmd (llama-cpp-python 0.3.36, llama_cpp.mtmd_cpp) on a text + mmproj GGUF pair:
the chunk layout of a prompt with one image and each image chunk's embeddings."""
import contextlib
import ctypes
import time

import numpy as np


def mtmd_layout(text_path, mmproj_path, rgb, prompt="<__media__>", n_threads=2, encode_ms=None):
    """rgb [H, W, 3] uint8 -> list of ("text", [ids]) / ("image", [n_tokens, n_embd] float32).
    encode_ms (a list): gets the wall time of each mtmd_encode_chunk call."""
    import llama_cpp
    from llama_cpp import mtmd_cpp as m

    llama_cpp.llama_backend_init()
    mp = llama_cpp.llama_model_default_params()
    model = llama_cpp.llama_model_load_from_file(text_path.encode(), mp)
    assert model, text_path
    cp = m.mtmd_context_params_default()
    cp.use_gpu = False
    cp.n_threads = n_threads
    cp.print_timings = False
    ctx = m.mtmd_init_from_file(mmproj_path.encode(), model, cp)
    assert ctx, mmproj_path
    try:
        h, w, _ = rgb.shape
        data = (ctypes.c_uint8 * rgb.size).from_buffer_copy(np.ascontiguousarray(rgb).tobytes())
        bmp = m.mtmd_bitmap_init(w, h, data)
        chunks = m.mtmd_input_chunks_init()
        text = m.mtmd_input_text()
        text.text = prompt.encode()
        text.text_len = len(text.text)
        text.add_special = False
        text.parse_special = True
        bitmaps = (m.mtmd_bitmap_p_ctypes * 1)(bmp)
        rc = m.mtmd_tokenize(ctx, chunks, ctypes.byref(text), bitmaps, 1)
        assert rc == 0, f"mtmd_tokenize: {rc}"
        out = []
        n_embd = llama_cpp.llama_model_n_embd(model)
        for i in range(m.mtmd_input_chunks_size(chunks)):
            ch = m.mtmd_input_chunks_get(chunks, i)
            n = m.mtmd_input_chunk_get_n_tokens(ch)
            if m.mtmd_input_chunk_get_type(ch) == 0:  # MTMD_INPUT_CHUNK_TYPE_TEXT
                cnt = ctypes.c_size_t(0)
                ids = m.mtmd_input_chunk_get_tokens_text(ch, ctypes.byref(cnt))
                out.append(("text", [ids[j] for j in range(cnt.value)]))
            else:
                t0 = time.perf_counter()
                assert m.mtmd_encode_chunk(ctx, ch) == 0
                if encode_ms is not None:
                    encode_ms.append((time.perf_counter() - t0) * 1000)
                p = m.mtmd_get_output_embd(ctx)
                arr = np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_float)), shape=(n * n_embd,))
                out.append(("image", arr.reshape(n, n_embd).copy()))
        m.mtmd_input_chunks_free(chunks)
        m.mtmd_bitmap_free(bmp)
        return out
    finally:
        m.mtmd_free(ctx)
        llama_cpp.llama_model_free(model)


@contextlib.contextmanager
def _mtmd_session(text_path, mmproj_path, n_ctx, n_batch, n_threads):
    """Yields (llama_cpp, mtmd_cpp, model, llama context, mtmd context) on the CPU; frees them after."""
    import llama_cpp
    from llama_cpp import mtmd_cpp as m

    llama_cpp.llama_backend_init()
    model = llama_cpp.llama_model_load_from_file(text_path.encode(), llama_cpp.llama_model_default_params())
    cp = llama_cpp.llama_context_default_params()
    cp.n_ctx = n_ctx
    cp.n_batch = n_batch
    cp.n_ubatch = n_batch
    cp.n_threads = cp.n_threads_batch = n_threads
    lctx = llama_cpp.llama_init_from_model(model, cp)
    mp = m.mtmd_context_params_default()
    mp.use_gpu = False
    mp.n_threads = n_threads
    mp.print_timings = False
    ctx = m.mtmd_init_from_file(mmproj_path.encode(), model, mp)
    try:
        yield llama_cpp, m, model, lctx, ctx
    finally:
        m.mtmd_free(ctx)
        llama_cpp.llama_free(lctx)
        llama_cpp.llama_model_free(model)


def _eval_prompt(llama_cpp, m, lctx, ctx, prompt, rgbs, add_special, n_batch):
    """Tokenizes prompt (one "<__media__>" per image of rgbs) and evaluates it; returns n_past."""
    bmps = []
    for rgb in rgbs:
        h, w, _ = rgb.shape
        data = (ctypes.c_uint8 * rgb.size).from_buffer_copy(np.ascontiguousarray(rgb).tobytes())
        bmps.append(m.mtmd_bitmap_init(w, h, data))
    chunks = m.mtmd_input_chunks_init()
    try:
        text = m.mtmd_input_text()
        text.text = prompt.encode()
        text.text_len = len(text.text)
        text.add_special = add_special
        text.parse_special = True
        arr = (m.mtmd_bitmap_p_ctypes * len(bmps))(*bmps)
        assert m.mtmd_tokenize(ctx, chunks, ctypes.byref(text), arr, len(bmps)) == 0
        n_past = llama_cpp.llama_pos(0)
        assert m.mtmd_helper_eval_chunks(ctx, lctx, chunks, 0, 0, n_batch, True, ctypes.byref(n_past)) == 0
        return n_past.value
    finally:
        m.mtmd_input_chunks_free(chunks)
        for b in bmps:
            m.mtmd_bitmap_free(b)


def _greedy(llama_cpp, model, lctx, n_gen):
    """After a prompt: (its last logits [n_vocab], n_gen greedy ids, the softmax probability of each)."""
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))

    def last_logits():
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(lctx, -1), shape=(n_vocab,)).copy()

    first = cur = last_logits()
    greedy, probs = [], []
    for _ in range(n_gen):
        tok = int(np.argmax(cur))
        greedy.append(tok)
        z = np.exp(cur.astype(np.float64) - cur.max())
        probs.append(z[tok] / z.sum())
        one = (llama_cpp.llama_token * 1)(tok)
        assert llama_cpp.llama_decode(lctx, llama_cpp.llama_batch_get_one(one, 1)) == 0
        cur = last_logits()
    return first, greedy, probs


def mtmd_generate(text_path, mmproj_path, rgb, n_gen=16, n_batch=512, n_threads=2):
    """The image's prompt (no BOS) through libmtmd and llama.cpp: first-token logits [n_vocab] and the
    greedy continuation of n_gen tokens."""
    with _mtmd_session(text_path, mmproj_path, 4096, n_batch, n_threads) as (llama_cpp, m, model, lctx, ctx):
        _eval_prompt(llama_cpp, m, lctx, ctx, "<__media__>", [rgb], False, n_batch)
        first, greedy, _ = _greedy(llama_cpp, model, lctx, n_gen)
        return first, greedy


def mtmd_prompt_greedy(text_path, mmproj_path, prompt, rgbs, n_gen=16, n_batch=512, n_threads=2, add_special=None):
    """A whole prompt text with one "<__media__>" per image of rgbs (BOS added as the model asks)
    through libmtmd and llama.cpp: (prompt length in positions, greedy ids of n_gen tokens, their
    text as llama.cpp's detokenizer gives it with special tokens hidden, the mean softmax
    probability of the greedy tokens). add_special (default: unless the prompt starts with "<s>")
    adds the model's BOS; pass False for a prompt that already starts with it (Gemma's "<bos>")."""
    with _mtmd_session(text_path, mmproj_path, 8192, n_batch, n_threads) as (llama_cpp, m, model, lctx, ctx):
        if add_special is None:
            add_special = not prompt.startswith("<s>")
        n_past = _eval_prompt(llama_cpp, m, lctx, ctx, prompt, rgbs, add_special, n_batch)
        _, greedy, probs = _greedy(llama_cpp, model, lctx, n_gen)
        vocab = llama_cpp.llama_model_get_vocab(model)
        pieces = b""
        for tok in greedy:
            buf = ctypes.create_string_buffer(64)
            n = llama_cpp.llama_token_to_piece(vocab, tok, buf, 64, 0, False)
            pieces += buf.raw[:max(n, 0)]
        return n_past, greedy, pieces.decode("utf-8", "replace"), float(np.mean(probs))
