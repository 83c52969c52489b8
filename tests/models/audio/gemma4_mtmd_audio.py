"""llama.cpp's libmtmd (llama-cpp-python 0.3.36, llama_cpp.mtmd_cpp) on a text + mmproj pair with an audio
tower: the chunks of a prompt with one audio clip (mtmd_bitmap_init_from_audio), each audio chunk's
embeddings, and the wall time of each encode."""
import ctypes
import time

import numpy as np


def mtmd_audio_chunks(text_path, mmproj_path, samples, n_threads=2, repeats=1):
    """samples: 16 kHz float -> ([("text", ids) | ("audio", [n, n_embd])], [encode seconds, ...])."""
    import llama_cpp
    from llama_cpp import mtmd_cpp as m

    llama_cpp.llama_backend_init()
    model = llama_cpp.llama_model_load_from_file(text_path.encode(), llama_cpp.llama_model_default_params())
    assert model, text_path
    cp = m.mtmd_context_params_default()
    cp.use_gpu = False
    cp.n_threads = n_threads
    cp.print_timings = False
    ctx = m.mtmd_init_from_file(mmproj_path.encode(), model, cp)
    assert ctx, mmproj_path
    try:
        assert m.mtmd_support_audio(ctx)
        s = np.ascontiguousarray(samples, dtype=np.float32)
        bmp = m.mtmd_bitmap_init_from_audio(s.size, s.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
        chunks = m.mtmd_input_chunks_init()
        text = m.mtmd_input_text()
        text.text = b"<__media__>"
        text.text_len = len(text.text)
        text.add_special = False
        text.parse_special = True
        bitmaps = (m.mtmd_bitmap_p_ctypes * 1)(bmp)
        assert m.mtmd_tokenize(ctx, chunks, ctypes.byref(text), bitmaps, 1) == 0
        n_embd = llama_cpp.llama_model_n_embd(model)
        out, times = [], []
        for i in range(m.mtmd_input_chunks_size(chunks)):
            ch = m.mtmd_input_chunks_get(chunks, i)
            n = m.mtmd_input_chunk_get_n_tokens(ch)
            if m.mtmd_input_chunk_get_type(ch) == 0:  # MTMD_INPUT_CHUNK_TYPE_TEXT
                cnt = ctypes.c_size_t(0)
                ids = m.mtmd_input_chunk_get_tokens_text(ch, ctypes.byref(cnt))
                out.append(("text", [ids[j] for j in range(cnt.value)]))
                continue
            for _ in range(repeats):
                t0 = time.perf_counter()
                assert m.mtmd_encode_chunk(ctx, ch) == 0
                times.append(time.perf_counter() - t0)
            p = m.mtmd_get_output_embd(ctx)
            arr = np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_float)), shape=(n * n_embd,))
            out.append(("audio", arr.reshape(n, n_embd).copy()))
        m.mtmd_input_chunks_free(chunks)
        m.mtmd_bitmap_free(bmp)
        return out, times
    finally:
        m.mtmd_free(ctx)
        llama_cpp.llama_model_free(model)
