"""cactus: run small language models on your own hardware.

The functions mirror the Cactus Python binding (cactus_init, cactus_complete, ...) over the C API;
`Model` is a Pythonic wrapper with streaming chat.
"""
from .api import (CactusError, cactus_complete, cactus_destroy, cactus_init, cactus_prefill,
                  cactus_render_prompt, cactus_reset, cactus_set_backend, cactus_stop,
                  cactus_tokenize, cactus_get_last_error, cactus_log_set_level, cactus_transcribe,
                  cactus_stream_transcribe_start, cactus_stream_transcribe_process,
                  cactus_stream_transcribe_stop, cactus_embed, cactus_image_embed, cactus_audio_embed,
                  cactus_rag_query)
from .model import Model

__all__ = [
    "CactusError", "Model", "cactus_complete", "cactus_destroy", "cactus_init", "cactus_prefill",
    "cactus_render_prompt", "cactus_reset", "cactus_set_backend", "cactus_stop", "cactus_tokenize",
    "cactus_get_last_error", "cactus_log_set_level", "cactus_transcribe", "cactus_stream_transcribe_start",
    "cactus_stream_transcribe_process", "cactus_stream_transcribe_stop", "cactus_embed", "cactus_image_embed",
    "cactus_audio_embed", "cactus_rag_query",
]
