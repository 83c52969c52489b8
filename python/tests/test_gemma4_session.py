"""The founding crash report's shape through the Python package: Gemma 4 (the reduced random-weight
file; CACTUS_GEMMA4_MODEL names another, e.g. the E2B-shaped one), 20 tools, thinking on, a forced
call answered with role:tool results, a turn under the lazy grammar, a new user message, with KeyDiff
compaction on (int8, rings wrapping) and then off on the same handle: all of it, from cactus_init to
cactus_destroy, on a threading.Thread started with threading.stack_size(256 KiB). Each reply is
JSON with success true, no Gemma marker in `response` or the stream, every call validates
(jsonschema), compaction happened, the cached prefix is reused wherever the rings allow
(gemma4_session.session_problems). tests/api/test_gemma4_session.cpp is the same through the C API."""
import os

import pytest

import cactus  # noqa: F401 (the library loads on the main thread, not the small-stack one)
import gemma4_session as gs
from cactus_test_paths import model_path

jsonschema = pytest.importorskip("jsonschema")


def gemma4_model():
    return os.environ.get("CACTUS_GEMMA4_MODEL") or model_path("gemma4-reduced-q4_0")


def test_session_from_a_small_stack_thread():
    path = gemma4_model()
    window = gs.sliding_window(path)
    tools = gs.load_tools()
    assert len(tools) == 20
    on, off = gs.on_small_stack(gs.both_sessions, path, tools)
    print("\n" + gs.describe(on, "on") + "\n" + gs.describe(off, "off"))
    problems = (gs.session_problems(on, "on", tools, jsonschema.Draft202012Validator, window)
                + gs.session_problems(off, "off", tools, jsonschema.Draft202012Validator, window))
    assert not problems, "\n".join(problems)


def test_thread_stack_is_the_small_one():
    """The helper really runs its function on a 256 KiB stack (the limit is the thread's own)."""
    import resource
    import threading

    def stack_of_this_thread():
        import ctypes
        import ctypes.util
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.pthread_self.restype = ctypes.c_ulong
        libc.pthread_getattr_np.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
        attr = (ctypes.c_char * 256)()  # pthread_attr_t is 56 bytes on x86-64 and aarch64 Linux
        size = ctypes.c_size_t()
        assert libc.pthread_getattr_np(libc.pthread_self(), attr) == 0
        libc.pthread_attr_getstacksize(attr, ctypes.byref(size))
        libc.pthread_attr_destroy(attr)
        return size.value, threading.current_thread().name

    size, name = gs.on_small_stack(stack_of_this_thread)
    assert name == "gemma4-session"
    assert size == gs.STACK_BYTES, (size, resource.getrlimit(resource.RLIMIT_STACK))
