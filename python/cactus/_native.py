"""Loads libcactus and declares the C API's signatures (include/cactus/cactus.h)."""
import ctypes
import os
from pathlib import Path

TOKEN_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_void_p)
LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


def _candidates():
    env = os.environ.get("CACTUS_LIBRARY")
    if env:
        yield Path(env)
    here = Path(__file__).resolve().parent
    yield here / "lib" / "libcactus.so"
    yield here.parent.parent / "build" / "lib" / "libcactus.so"


def _load():
    tried = []
    for path in _candidates():
        tried.append(str(path))
        if path.exists():
            return ctypes.CDLL(str(path))
    raise OSError("libcactus.so not found (tried: %s); set CACTUS_LIBRARY" % ", ".join(tried))


lib = _load()

lib.cactus_init.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_bool]
lib.cactus_init.restype = ctypes.c_void_p
lib.cactus_destroy.argtypes = [ctypes.c_void_p]
lib.cactus_destroy.restype = None
lib.cactus_reset.argtypes = [ctypes.c_void_p]
lib.cactus_reset.restype = None
lib.cactus_stop.argtypes = [ctypes.c_void_p]
lib.cactus_stop.restype = None
lib.cactus_set_backend.argtypes = [ctypes.c_char_p]
lib.cactus_set_backend.restype = ctypes.c_int
lib.cactus_complete.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
                                ctypes.c_char_p, ctypes.c_char_p, TOKEN_CALLBACK, ctypes.c_void_p,
                                ctypes.c_void_p, ctypes.c_size_t]
lib.cactus_complete.restype = ctypes.c_int
lib.cactus_prefill.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
                               ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
lib.cactus_prefill.restype = ctypes.c_int
lib.cactus_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint32),
                                ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
lib.cactus_tokenize.restype = ctypes.c_int
lib.cactus_render_prompt.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                     ctypes.c_char_p, ctypes.c_size_t]
lib.cactus_render_prompt.restype = ctypes.c_int
lib.cactus_get_last_error.argtypes = []
lib.cactus_get_last_error.restype = ctypes.c_char_p
lib.cactus_log_set_level.argtypes = [ctypes.c_int]
lib.cactus_log_set_level.restype = None
lib.cactus_transcribe.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
                                  ctypes.c_char_p, TOKEN_CALLBACK, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
lib.cactus_transcribe.restype = ctypes.c_int
lib.cactus_stream_transcribe_start.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
lib.cactus_stream_transcribe_start.restype = ctypes.c_void_p
lib.cactus_stream_transcribe_process.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p,
                                                 ctypes.c_size_t]
lib.cactus_stream_transcribe_process.restype = ctypes.c_int
lib.cactus_stream_transcribe_stop.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
lib.cactus_stream_transcribe_stop.restype = ctypes.c_int


def _declare(name, argtypes, restype):
    """Declares a C function; a library built before the function existed lacks it (api.py names it then)."""
    try:
        fn = getattr(lib, name)
    except AttributeError:
        return
    fn.argtypes = argtypes
    fn.restype = restype


_FLOATS = ctypes.POINTER(ctypes.c_float)
_SIZE_P = ctypes.POINTER(ctypes.c_size_t)
_declare("cactus_embed", [ctypes.c_void_p, ctypes.c_char_p, _FLOATS, ctypes.c_size_t, _SIZE_P, ctypes.c_bool],
         ctypes.c_int)
_declare("cactus_image_embed", [ctypes.c_void_p, ctypes.c_char_p, _FLOATS, ctypes.c_size_t, _SIZE_P], ctypes.c_int)
_declare("cactus_audio_embed", [ctypes.c_void_p, ctypes.c_char_p, _FLOATS, ctypes.c_size_t, _SIZE_P], ctypes.c_int)
_declare("cactus_rag_query", [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t],
         ctypes.c_int)
