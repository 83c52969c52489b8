"""llama.cpp's libmtmd (llama-cpp-python 0.3.36, llama_cpp.mtmd_cpp) on a text + mmproj GGUF pair:
the chunk layout of a prompt with one image and each image chunk's embeddings."""
import ctypes

import numpy as np


def mtmd_layout(text_path, mmproj_path, rgb, prompt="<__media__>", n_threads=2):
    """rgb [H, W, 3] uint8 -> list of ("text", [ids]) / ("image", [n_tokens, n_embd] float32)."""
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
                assert m.mtmd_encode_chunk(ctx, ch) == 0
                p = m.mtmd_get_output_embd(ctx)
                arr = np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_float)), shape=(n * n_embd,))
                out.append(("image", arr.reshape(n, n_embd).copy()))
        m.mtmd_input_chunks_free(chunks)
        m.mtmd_bitmap_free(bmp)
        return out
    finally:
        m.mtmd_free(ctx)
        llama_cpp.llama_model_free(model)
