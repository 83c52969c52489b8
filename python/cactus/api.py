"""The Cactus-compatible functions: thin wrappers that encode JSON, call libcactus, and raise
CactusError with the engine's message on failure."""
import array
import contextlib
import ctypes
import json
import os
import sys
import tempfile

from ._native import TOKEN_CALLBACK, lib

_MIN_RESPONSE_BUFFER = 1 << 20


class CactusError(RuntimeError):
    """An error reported by the engine (its message is the C API's last error)."""


def cactus_get_last_error():
    return lib.cactus_get_last_error().decode("utf-8", "replace")


def _encode(value, what):
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    try:
        return json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise CactusError("%s is not JSON-serialisable: %s" % (what, e)) from None


def _check_handle(model):
    if not model:
        raise CactusError("the model handle is None (was cactus_init successful?)")
    return ctypes.c_void_p(model)


def _response_buffer_size(options_bytes):
    max_tokens = 100
    if options_bytes:
        try:
            max_tokens = int(json.loads(options_bytes).get("max_tokens", 100))
        except (ValueError, AttributeError, TypeError):
            pass
    return max(_MIN_RESPONSE_BUFFER, 64 * max_tokens + 65536)


@contextlib.contextmanager
def _entries_as_files(messages, key, prefix, suffix, data_of):
    """Messages whose `key` lists may hold paths or data in memory: data_of(entry) gives the bytes of an
    entry that is not an os.PathLike (None: the entry stays as it is); those bytes are written to
    temporary files (removed afterwards), so the C API sees paths."""
    if not isinstance(messages, list) or not any(isinstance(m, dict) and m.get(key) for m in messages):
        yield messages
        return
    written = []
    try:
        out = []
        for m in messages:
            if not isinstance(m, dict) or not m.get(key):
                out.append(m)
                continue
            paths = []
            for entry in m[key]:
                if isinstance(entry, os.PathLike):
                    paths.append(os.fspath(entry))
                    continue
                data = data_of(entry)
                if data is None:
                    paths.append(entry)
                    continue
                fd, path = tempfile.mkstemp(prefix=prefix, suffix=suffix)
                written.append(path)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                paths.append(path)
            out.append(dict(m, **{key: paths}))
        yield out
    finally:
        for path in written:
            with contextlib.suppress(OSError):
                os.remove(path)


def _image_data(image):
    # str: a path (anything else: the engine names the bad value)
    return bytes(image) if isinstance(image, (bytes, bytearray, memoryview)) else None


def _image_files(messages):
    """Messages whose "images" may hold paths (str or os.PathLike) or encoded image bytes (PNG, JPEG,
    BMP, GIF): bytes are written to temporary files (removed afterwards), so the C API sees paths."""
    return _entries_as_files(messages, "images", "cactus-image-", "", _image_data)


def _wav_bytes(samples):
    """A 16-bit mono 16 kHz WAV file's bytes for float samples in [-1, 1] (a sequence or numpy array)."""
    import io
    import wave
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(pcm16_bytes(samples))
    return buffer.getvalue()


def _audio_data(clip):
    if isinstance(clip, str):
        return None
    return bytes(clip) if isinstance(clip, (bytes, bytearray, memoryview)) else _wav_bytes(clip)


def _audio_files(messages):
    """Messages whose "audio" may hold paths (str or os.PathLike), encoded WAV bytes or float samples
    at 16 kHz (a sequence or numpy array): bytes and samples are written to temporary WAV files
    (removed afterwards), so the C API sees paths."""
    return _entries_as_files(messages, "audio", "cactus-audio-", ".wav", _audio_data)


@contextlib.contextmanager
def _media_files(messages):
    with _image_files(messages) as with_images, _audio_files(with_images) as with_audio:
        yield with_audio


def _pcm_argument(pcm):
    """(buffer, size) for the C API's pcm_buffer: None, PCM bytes or float samples at 16 kHz."""
    if pcm is None:
        return None, 0
    data = pcm16_bytes(pcm)
    return data, len(data)


def cactus_init(model_path, corpus_dir=None, cache_index=False):
    """Loads a model (a .gguf path, a folder holding one, or a known short name); returns a handle.
    corpus_dir: a folder of .txt/.md files indexed for retrieval (cactus_rag_query)."""
    corpus_dir = None if corpus_dir is None else os.fspath(corpus_dir)
    handle = lib.cactus_init(_encode(str(model_path), "model_path"), _encode(corpus_dir, "corpus_dir"),
                             bool(cache_index))
    if not handle:
        raise CactusError(cactus_get_last_error())
    return handle


def cactus_destroy(model):
    if model:
        lib.cactus_destroy(ctypes.c_void_p(model))


def cactus_reset(model):
    lib.cactus_reset(_check_handle(model))


def cactus_stop(model):
    lib.cactus_stop(_check_handle(model))


def cactus_set_backend(name):
    if lib.cactus_set_backend(_encode(name, "name")) != 0:
        raise CactusError(cactus_get_last_error())


def cactus_log_set_level(level):
    lib.cactus_log_set_level(int(level))


def _decode_response(buffer, rc):
    text = buffer.value.decode("utf-8", "replace")
    if rc < 0:
        message = cactus_get_last_error()
        if text:
            try:
                message = json.loads(text).get("error") or message
            except ValueError:
                pass
        raise CactusError(message)
    return json.loads(text)


def cactus_complete(model, messages, options=None, tools=None, callback=None, pcm=None):
    """Chat completion. messages/options/tools: lists/dicts or JSON strings. A message may carry
    "images": a list of paths or encoded image bytes (the model needs its mmproj), and "audio": a
    list of WAV paths, encoded WAV bytes or float samples at 16 kHz (an mmproj with an audio tower;
    at most 30 s a clip). pcm: one more clip for the last user message, 16-bit mono 16 kHz PCM bytes
    or float samples at 16 kHz. callback(text, token_id) receives each streamed piece. Returns the
    response as a dict."""
    handle = _check_handle(model)
    options_bytes = _encode(options, "options")
    size = _response_buffer_size(options_bytes)
    buffer = ctypes.create_string_buffer(size)
    errors = []

    def on_token(piece, token_id, _user_data):
        if callback is None or errors:
            return
        try:
            callback(piece.decode("utf-8", "replace"), token_id)
        except BaseException as e:  # never let an exception unwind through C
            errors.append(e)
            lib.cactus_stop(handle)

    c_callback = TOKEN_CALLBACK(on_token)
    pcm_data, pcm_size = _pcm_argument(pcm)
    with _media_files(messages) as messages:
        rc = lib.cactus_complete(handle, _encode(messages, "messages"), buffer, size, options_bytes,
                                 _encode(tools, "tools"), c_callback, None, pcm_data, pcm_size)
    if errors:
        raise errors[0]
    return _decode_response(buffer, rc)


def cactus_prefill(model, messages, options=None, tools=None, pcm=None):
    handle = _check_handle(model)
    buffer = ctypes.create_string_buffer(65536)
    pcm_data, pcm_size = _pcm_argument(pcm)
    with _media_files(messages) as messages:
        rc = lib.cactus_prefill(handle, _encode(messages, "messages"), buffer, len(buffer),
                                _encode(options, "options"), _encode(tools, "tools"), pcm_data, pcm_size)
    return _decode_response(buffer, rc)


def cactus_tokenize(model, text):
    handle = _check_handle(model)
    data = _encode(text, "text")
    count = ctypes.c_size_t(0)
    if lib.cactus_tokenize(handle, data, None, 0, ctypes.byref(count)) != 0:
        raise CactusError(cactus_get_last_error())
    ids = (ctypes.c_uint32 * max(1, count.value))()
    if lib.cactus_tokenize(handle, data, ids, count.value, ctypes.byref(count)) != 0:
        raise CactusError(cactus_get_last_error())
    return list(ids[:count.value])


def cactus_render_prompt(model, messages, options=None, tools=None):
    handle = _check_handle(model)
    size = 1 << 16
    while True:
        buffer = ctypes.create_string_buffer(size)
        with _image_files(messages) as files:
            rc = lib.cactus_render_prompt(handle, _encode(files, "messages"), _encode(options, "options"),
                                          _encode(tools, "tools"), buffer, size)
        if rc >= 0:
            return buffer.value.decode("utf-8")
        if rc == -2 and size < (1 << 28):
            size *= 4
            continue
        raise CactusError(cactus_get_last_error())


def pcm16_bytes(audio):
    """16-bit little-endian PCM bytes from bytes (kept), or a sequence / numpy array of floats in [-1, 1]."""
    if isinstance(audio, (bytes, bytearray, memoryview)):
        return bytes(audio)
    try:
        import numpy as np
        a = np.clip(np.asarray(audio, dtype=np.float32).reshape(-1), -1.0, 1.0)
        return (a * 32767.0).round().astype("<i2").tobytes()
    except ImportError:
        return array.array("h", (int(round(max(-1.0, min(1.0, float(x))) * 32767.0)) for x in audio)).tobytes()


def pcm16_samples(data):
    """Float samples in [-1, 1] from 16-bit little-endian PCM bytes (an odd byte count is an error)."""
    data = bytes(data)
    if len(data) % 2:
        raise CactusError("PCM audio: %d bytes is not a whole number of 16-bit samples" % len(data))
    values = array.array("h")
    values.frombytes(data)
    if sys.byteorder == "big":
        values.byteswap()
    return [v / 32768.0 for v in values]


def cactus_transcribe(model, audio_path=None, pcm=None, options=None, callback=None):
    """Speech to text (a Whisper handle). Exactly one of audio_path (a WAV file) and pcm (16-bit mono
    16 kHz bytes). callback(text, 0) receives each segment. Returns the response dict."""
    handle = _check_handle(model)
    size = _MIN_RESPONSE_BUFFER * 4
    buffer = ctypes.create_string_buffer(size)
    errors = []

    def on_segment(piece, token_id, _user_data):
        if callback is None or errors:
            return
        try:
            callback(piece.decode("utf-8", "replace"), token_id)
        except BaseException as e:  # never let an exception unwind through C
            errors.append(e)

    c_callback = TOKEN_CALLBACK(on_segment)
    data = pcm16_bytes(pcm) if pcm is not None else None
    rc = lib.cactus_transcribe(handle, _encode(None if audio_path is None else str(audio_path), "audio_path"), None,
                               buffer, size, _encode(options, "options"), c_callback, None, data,
                               len(data) if data is not None else 0)
    if errors:
        raise errors[0]
    return _decode_response(buffer, rc)


def cactus_stream_transcribe_start(model, options=None):
    stream = lib.cactus_stream_transcribe_start(_check_handle(model), _encode(options, "options"))
    if not stream:
        raise CactusError(cactus_get_last_error())
    return stream


def cactus_stream_transcribe_process(stream, pcm):
    if not stream:
        raise CactusError("the stream handle is None")
    data = pcm16_bytes(pcm)
    buffer = ctypes.create_string_buffer(_MIN_RESPONSE_BUFFER)
    rc = lib.cactus_stream_transcribe_process(ctypes.c_void_p(stream), data, len(data), buffer, len(buffer))
    return _decode_response(buffer, rc)


def cactus_stream_transcribe_stop(stream):
    if not stream:
        raise CactusError("the stream handle is None")
    buffer = ctypes.create_string_buffer(_MIN_RESPONSE_BUFFER * 4)
    rc = lib.cactus_stream_transcribe_stop(ctypes.c_void_p(stream), buffer, len(buffer))
    return _decode_response(buffer, rc)


# ---- embeddings and retrieval ------------------------------------------------------------------
def _function(name):
    fn = getattr(lib, name, None)
    if fn is None:
        raise CactusError("%s is missing from this libcactus (rebuild it)" % name)
    return fn


def _vector(call, what):
    """Calls call(buffer, bytes, &dim) with a buffer that grows to the dimension the engine reports."""
    capacity = 4096
    dim = ctypes.c_size_t(0)
    for _ in range(2):
        buffer = (ctypes.c_float * capacity)()
        rc = call(buffer, ctypes.sizeof(buffer), ctypes.byref(dim))
        if rc >= 0:
            return list(buffer[:rc])
        if rc == -2 and dim.value > capacity:
            capacity = dim.value
            continue
        raise CactusError(cactus_get_last_error() or "%s failed" % what)
    raise CactusError("%s: the buffer stayed too small (%d floats)" % (what, dim.value))


def cactus_embed(model, text, normalize=True):
    """The embedding of one text (a list of floats; unit length when normalize)."""
    handle, data = _check_handle(model), _encode(text, "text")
    fn = _function("cactus_embed")
    return _vector(lambda buf, size, dim: fn(handle, data, buf, size, dim, bool(normalize)), "cactus_embed")


def cactus_image_embed(model, image_path):
    """The embedding of an image file (a model loaded with its mmproj); unit length."""
    handle, data = _check_handle(model), _encode(os.fspath(image_path), "image_path")
    fn = _function("cactus_image_embed")
    return _vector(lambda buf, size, dim: fn(handle, data, buf, size, dim), "cactus_image_embed")


def cactus_audio_embed(model, audio_path):
    """The embedding of a WAV file (a Whisper handle); unit length."""
    handle, data = _check_handle(model), _encode(os.fspath(audio_path), "audio_path")
    fn = _function("cactus_audio_embed")
    return _vector(lambda buf, size, dim: fn(handle, data, buf, size, dim), "cactus_audio_embed")


def cactus_rag_query(model, query, top_k=5):
    """Retrieval over the handle's corpus (cactus_init's corpus_dir): the response JSON text,
    {"chunks": [{"score", "source", "content"}]} (with "error" when there is no corpus)."""
    handle, data = _check_handle(model), _encode(query, "query")
    fn = _function("cactus_rag_query")
    size = max(_MIN_RESPONSE_BUFFER, 65536 * max(1, int(top_k)))
    for _ in range(3):
        buffer = ctypes.create_string_buffer(size)
        rc = fn(handle, data, buffer, size, int(top_k))
        if rc >= 0:
            return buffer.value.decode("utf-8", "replace")
        message = cactus_get_last_error()
        if "small" not in message:  # -1 also answers a buffer too small: only that is retried
            raise CactusError(message)
        size *= 8
    raise CactusError(cactus_get_last_error())
