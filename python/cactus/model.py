"""A Pythonic wrapper: Model(path).chat(messages) streams text pieces."""
import queue
import threading

from . import api


def _is_clip(audio):
    """Whether `audio` is one clip (a path, PCM bytes, or samples) rather than a list of clips."""
    import os
    if isinstance(audio, (str, os.PathLike, bytes, bytearray, memoryview)):
        return True
    if hasattr(audio, "ndim"):  # a numpy array: 1-D is one clip
        return audio.ndim == 1
    import numbers
    return len(audio) > 0 and isinstance(audio[0], numbers.Real)


def _with_audio(messages, audio):
    """(messages, pcm): one clip in memory goes as the C API's pcm_buffer (attached to the last user
    message by the engine); otherwise every clip joins the last user message's "audio" (paths as they
    are, PCM bytes as float samples, written to WAV files by api.cactus_complete) and pcm is None."""
    import os
    if audio is None:
        return messages, None
    clips = [audio] if _is_clip(audio) else list(audio)
    if not clips:
        return messages, None
    if isinstance(messages, str):
        import json
        messages = json.loads(messages)
    messages = [dict(m) if isinstance(m, dict) else m for m in messages]
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise api.CactusError("audio: the messages hold no user message to attach the audio to")
    if len(clips) == 1 and not isinstance(clips[0], (str, os.PathLike)):
        return messages, clips[0]  # one clip in memory: the C API's pcm_buffer
    entries = list(users[-1].get("audio") or [])
    for clip in clips:
        if isinstance(clip, (str, os.PathLike)):
            entries.append(clip)
        else:  # written to a WAV file by api.cactus_complete: PCM bytes become samples first
            entries.append(api.pcm16_samples(clip) if isinstance(clip, (bytes, bytearray, memoryview)) else clip)
    users[-1]["audio"] = entries
    return messages, None


class Model:
    """A loaded model. Use as a context manager or call close()."""

    def __init__(self, path="qwen2.5-coder-0.5b", corpus_dir=None, cache_index=True, draft_model=None, spec_type=None,
                 draft_max=None, **default_options):
        """path: a known model's short name or a .gguf path (default: the CLI's default model,
        kDefaultModel in src/engine/model_store.h). corpus_dir: a folder of .txt/.md files indexed
        for search() and for retrieval in every completion (docs/API.md); cache_index: reuse the
        index files there while they are current.

        Speculative decoding (the same replies in fewer model steps): draft_model, a model with the
        same vocabulary (a known name or a .gguf path; implies spec_type "draft"); spec_type "draft",
        "ngram" (prompt lookup, no second model) or "off"; draft_max, most tokens drafted per step
        (1..64). They apply from the first completion on (the draft model loads then) and may also
        be given per call in options; responses then carry draft_tokens and draft_accepted, and
        decode_tokens / decode_steps is the tokens per model step. Other keyword arguments are
        default options of every call (docs/API.md)."""
        self._handle = None
        self._handle = api.cactus_init(path, corpus_dir, cache_index)
        speculative = {"draft_model": draft_model, "spec_type": spec_type, "draft_max": draft_max}
        self._default_options = {k: v for k, v in speculative.items() if v is not None}
        self._default_options.update(default_options)
        self.last_response = None

    def close(self):
        if self._handle:
            api.cactus_destroy(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _options(self, options):
        merged = dict(self._default_options)
        merged.update(options or {})
        return merged

    def complete(self, messages, options=None, tools=None, callback=None, audio=None):
        """One completion; returns the response dict. Messages may carry "images" and "audio"
        (api.cactus_complete). audio: clips for the last user message (the model's mmproj needs an
        audio tower; at most 30 s each): a WAV path, 16-bit mono 16 kHz PCM bytes or float samples
        at 16 kHz (a list or numpy array), or a list of those."""
        messages, pcm = _with_audio(messages, audio)
        self.last_response = api.cactus_complete(self._handle, messages, self._options(options), tools, callback,
                                                 pcm=pcm)
        return self.last_response

    def chat(self, messages, stream=True, options=None, tools=None, audio=None):
        """With stream=True, yields text pieces as they are generated (the full response dict is in
        last_response afterwards); with stream=False, returns the reply text. audio: as complete()."""
        if not stream:
            return self.complete(messages, options, tools, audio=audio)["response"]
        return self._stream(messages, options, tools, audio)

    def _stream(self, messages, options, tools, audio=None):
        pieces = queue.Queue()
        done = object()
        failure = []

        def worker():
            try:
                self.complete(messages, options, tools, callback=lambda text, _id: pieces.put(text), audio=audio)
            except BaseException as e:
                failure.append(e)
            finally:
                pieces.put(done)

        thread = threading.Thread(target=worker, daemon=True)
        thread.start()
        try:
            while True:
                item = pieces.get()
                if item is done:
                    break
                yield item
        finally:
            if thread.is_alive():
                api.cactus_stop(self._handle)
            thread.join()
        if failure:
            raise failure[0]

    def reset(self):
        api.cactus_reset(self._handle)

    def stop(self):
        api.cactus_stop(self._handle)

    def tokenize(self, text):
        return api.cactus_tokenize(self._handle, text)

    def render_prompt(self, messages, options=None, tools=None):
        return api.cactus_render_prompt(self._handle, messages, options, tools)

    # ---- speech (Whisper models) ---------------------------------------------------------------
    def transcribe(self, audio, options=None, callback=None):
        """Speech to text: audio is a WAV path, 16-bit mono 16 kHz PCM bytes, or float samples at
        16 kHz (a list or numpy array). options: the C API's (docs/API.md), e.g. {"temperature": 0,
        "beam_size": 5}. Returns the response dict (response, segments, language, ...)."""
        import os
        if isinstance(audio, (str, os.PathLike)):
            return api.cactus_transcribe(self._handle, audio_path=audio, options=self._options(options),
                                         callback=callback)
        return api.cactus_transcribe(self._handle, pcm=audio, options=self._options(options), callback=callback)

    def transcribe_stream(self, pieces, options=None):
        """Live transcription: feeds each piece (PCM bytes or float samples at 16 kHz, any length) and
        yields the response dicts ({confirmed, pending, ...}); the last one is the final result."""
        stream = api.cactus_stream_transcribe_start(self._handle, self._options(options))
        try:
            for piece in pieces:
                yield api.cactus_stream_transcribe_process(stream, piece)
        except BaseException:
            api.lib.cactus_stream_transcribe_stop(stream, None, 0)
            raise
        yield api.cactus_stream_transcribe_stop(stream)

    # ---- embeddings and retrieval ----------------------------------------------------------------
    def embed(self, text, normalize=True):
        """The embedding of a text (a list of floats), or of each text of a list (a list of lists)."""
        if isinstance(text, str):
            return api.cactus_embed(self._handle, text, normalize)
        return [api.cactus_embed(self._handle, t, normalize) for t in text]

    def image_embed(self, path):
        return api.cactus_image_embed(self._handle, path)

    def audio_embed(self, path):
        return api.cactus_audio_embed(self._handle, path)

    def search(self, query, top_k=5):
        """The corpus chunks nearest the query, best first: [{"score", "source", "content"}]. Raises
        RuntimeError (CactusError) when the handle has no corpus or the query is empty."""
        import json
        response = json.loads(api.cactus_rag_query(self._handle, query, top_k))
        if response.get("error"):
            raise api.CactusError(response["error"])
        return response["chunks"]
