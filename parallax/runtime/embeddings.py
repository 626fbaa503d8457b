"""The process's sentence embeddings, for de-duplicating lessons and choosing playbook items.

Local MiniLM by default, or an OpenAI-compatible endpoint; vectors are cached by exact text.
See docs/internals/process.md#embeddings.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
from langchain_core.embeddings import Embeddings
from pydantic import SecretStr

from parallax.runtime import settings as settings_mod

CACHE_SIZE = 20_000

_lock = threading.Lock()
_encoding = threading.Lock()
"""Held while missing vectors are computed: callers that need the same texts at the same time
(the groups of a learn batch all need the playbook's items) wait for one encoding, not do ten."""
_model: Embeddings | None = None
_cache: OrderedDict[str, np.ndarray] = OrderedDict()


def forget() -> None:
    """Empty the vector cache (benchmarks start each mode cold, so no mode inherits another's
    work)."""
    with _lock:
        _cache.clear()


def embedder() -> Embeddings:
    """The process's embedder: the local MiniLM, or the endpoint PARALLAX_EMBEDDINGS_URL names."""
    global _model
    if _model is None:
        with _lock:
            if _model is None:
                settings = settings_mod.load()
                if settings.embeddings_url:
                    from langchain_openai import OpenAIEmbeddings

                    # the fields' own names (populate_by_name): pydantic's mypy plugin knows no
                    # aliases there
                    _model = OpenAIEmbeddings(
                        openai_api_base=settings.embeddings_url,
                        model=settings.embeddings_model,
                        openai_api_key=SecretStr(settings.api_key),
                        check_embedding_ctx_length=False,
                    )
                else:
                    from parallax.runtime.minilm import MiniLM

                    _model = MiniLM(settings.embed_model, threads=settings.embed_threads)
    return _model


def _vectors(model: Embeddings, texts: list[str]) -> np.ndarray:
    if hasattr(model, "encode"):  # the local MiniLM gives numpy directly
        encoded: np.ndarray = model.encode(texts)
        return encoded
    rows = np.asarray(model.embed_documents(texts), dtype=np.float32)
    unit: np.ndarray = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    return unit


def embed(texts: list[str]) -> np.ndarray:
    """Unit vectors for `texts` (float32, shape (n, 384)); cached per exact text."""
    texts = list(texts)
    with _lock:
        missing = {t for t in texts if t not in _cache}
    if missing:
        with _encoding:
            with _lock:  # what another caller encoded while this one waited
                todo = sorted(t for t in missing if t not in _cache)
            vectors: np.ndarray | list[np.ndarray] = _vectors(embedder(), todo) if todo else []
            with _lock:
                for text, vector in zip(todo, vectors, strict=True):
                    _cache[text] = vector.astype(np.float32)
                    if len(_cache) > CACHE_SIZE:
                        _cache.popitem(last=False)
    with _lock:
        rows = []
        for text in texts:
            vector = _cache.get(text)
            if vector is None:  # evicted between the two steps by a huge concurrent call
                vector = _vectors(embedder(), [text])[0].astype(np.float32)
            else:
                _cache.move_to_end(text)
            rows.append(vector)
    return np.stack(rows) if rows else np.zeros((0, 384), dtype=np.float32)
