"""The local MiniLM gives sentence-transformers' vectors without torch, and refuses other files."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from parallax.runtime.minilm import MiniLM, MiniLMMissing, bundled_model_dir

RECORDED = Path(__file__).resolve().parents[1] / "data" / "minilm_vectors.json"


@pytest.fixture(scope="module")
def model() -> MiniLM:
    return MiniLM()


def test_vectors_match_the_ones_sentence_transformers_recorded(model):
    recorded = json.loads(RECORDED.read_text())["items"]
    texts = [item["text"] for item in recorded]
    got = model.encode(texts)
    want = np.array([item["vector"] for item in recorded], dtype=np.float32)
    assert got.shape == (len(texts), 384)
    assert np.abs(got - want).max() < 1e-5
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # batching and order do not change a vector
    assert np.abs(model.encode(texts[::-1])[::-1] - got).max() < 1e-6
    assert np.abs(np.array(model.embed_query(texts[3])) - got[3]).max() < 1e-6


def test_long_texts_are_cut_at_256_tokens_like_sentence_transformers(model):
    long = "net margin " * 400
    assert (
        np.abs(
            model.encode([long])[0] - model.encode([long + " and more words at the end"])[0]
        ).max()
        < 1e-6
    )
    assert model.encode([]).shape == (0, 384)


def test_torch_is_never_imported(model):
    model.encode(["a lesson"])
    assert "torch" not in sys.modules and "sentence_transformers" not in sys.modules


def test_other_weights_under_the_same_name_are_refused(tmp_path):
    copy = tmp_path / "model"
    shutil.copytree(bundled_model_dir(), copy)
    with open(copy / "model.safetensors", "r+b") as f:
        f.seek(-4, 2)
        f.write(b"\x00\x00\x80\x3f")
    with pytest.raises(MiniLMMissing, match="not the all-MiniLM-L6-v2 file"):
        MiniLM(copy)
    with pytest.raises(MiniLMMissing, match="cannot read"):
        MiniLM(tmp_path / "nowhere")
