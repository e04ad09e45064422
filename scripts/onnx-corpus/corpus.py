#!/usr/bin/python3
"""Writes the ONNX test corpus: models in the shapes real exporters write.

The models are written with Debian's python3-onnx (onnx.helper), outside
the project's own ONNX code, in the shapes torch.onnx.export, skl2onnx and
onnxmltools produce: a PyTorch-style MLP (nn.Linear as MatMul against a
transposed weight, erf-GELU, reshape targets computed from Shape), the
same with opset 20's Gelu, a small CNN on 1x28x28 images, a MiniLM-style
encoder layer on token ids with an attention mask, scikit-learn linear
models (with ZipMap), and 50-tree gradient-boosted ensembles. Weights and
inputs come from a seeded numpy generator, so every run writes the same
files.

Usage: corpus.py OUT_DIR

OUT_DIR/repo/<name>/1/model.onnx is a model repository (Triton's
layout), and OUT_DIR/inputs.json holds each model's test inputs:
  {"<name>": {"<input>": {"datatype": "FP32"|"INT64", "shape": [...],
                          "data": [...flat...]}}}
reference.cjs runs them through ONNX Runtime and writes expected.json.
onnxruntime-node cannot return ZipMap's sequence of maps ("Non tensor
type is temporarily not supported"), so for a model with a ZipMap,
OUT_DIR/ort/<name>.onnx is the same model with the ZipMap replaced by an
Identity (ZipMap only repacks its input tensor), which reference.cjs runs
instead.
"""

import json
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, TypeProto, helper, numpy_helper, save

RNG = np.random.default_rng(20261125)
ROWS = 8  # test rows per model


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def weights(*shape, scale=None):
    fan_in = shape[0] if len(shape) == 1 else int(np.prod(shape[1:]))
    scale = scale or 1 / math.sqrt(max(fan_in, 1))
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def i64(*values):
    return np.array(values, dtype=np.int64)


class Graph:
    """Collects nodes and initializers with unique names."""

    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, prefix):
        self.n += 1
        return f"{prefix}_{self.n}"

    def const(self, array, prefix="c"):
        name = self.name(prefix)
        self.inits.append(init(name, array))
        return name

    def op(self, op, inputs, domain=None, outputs=1, **attrs):
        outs = [self.name(op.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=self.name(op), domain=domain, **attrs))
        return outs[0] if outputs == 1 else outs

    def linear(self, x, w_out_in, b, cast=False):
        # torch.onnx.export's nn.Linear on a >2-D input, or in some
        # versions on any input: MatMul against the transposed weight.
        wt = self.op("Transpose", [self.const(w_out_in, "weight")], perm=[1, 0])
        if cast:
            x = self.op("Cast", [x], to=TensorProto.FLOAT)
        return self.op("Add", [self.op("MatMul", [x, wt]), self.const(b, "bias")])

    def erf_gelu(self, x):
        # nn.GELU() below opset 20: x * 0.5 * (1 + erf(x / sqrt(2))).
        e = self.op("Erf", [self.op("Div", [x, self.const(np.float32(math.sqrt(2)))])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [e, self.const(np.float32(1))])]), self.const(np.float32(0.5))])

    def batch_dim(self, x):
        # x.size(0) as torch exports it: Shape, Gather 0, Unsqueeze.
        n = self.op("Gather", [self.op("Shape", [x]), self.const(np.int64(0))], axis=0)
        return self.op("Unsqueeze", [n, self.const(i64(0))])

    def reshape_batch(self, x, rest):
        # x.view(x.size(0), *rest) with the target computed from Shape.
        target = self.op("Concat", [self.batch_dim(x), self.const(i64(*rest))], axis=0)
        return self.op("Reshape", [x, target])

    def layer_norm_decomposed(self, x, width, opset):
        mean = self.reduce_mean(x, opset)
        d = self.op("Sub", [x, mean])
        var = self.reduce_mean(self.op("Pow", [d, self.const(np.float32(2))]), opset)
        std = self.op("Sqrt", [self.op("Add", [var, self.const(np.float32(1e-12))])])
        y = self.op("Div", [d, std])
        gamma = (1 + 0.1 * RNG.standard_normal(width)).astype(np.float32)
        beta = (0.1 * RNG.standard_normal(width)).astype(np.float32)
        return self.op("Add", [self.op("Mul", [y, self.const(gamma, "gamma")]), self.const(beta, "beta")])

    def reduce_mean(self, x, opset):
        if opset >= 18:
            return self.op("ReduceMean", [x, self.const(i64(-1))], keepdims=1)
        return self.op("ReduceMean", [x], axes=[-1], keepdims=1)


def model(g, inputs, outputs, opset, ml_opset=None, ir=8):
    graph = helper.make_graph(g.nodes, "corpus", inputs, outputs, g.inits)
    imports = [helper.make_opsetid("", opset)]
    if ml_opset:
        imports.append(helper.make_opsetid("ai.onnx.ml", ml_opset))
    m = helper.make_model(graph, opset_imports=imports, producer_name="llmserve-onnx-corpus")
    m.ir_version = ir
    return m


def fp32_input(name, *shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", *shape])


def out(name, elem=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def torch_mlp(opset, gelu20=False):
    g = Graph()
    x = "input"
    h = g.linear(x, weights(32, 20), weights(32), cast=True)
    h = g.op("Gelu", [h]) if gelu20 else g.erf_gelu(h)
    # x.view(n, 4, 8) and back to x.view(n, -1), targets from Shape.
    h = g.reshape_batch(h, [4, 8])
    h = g.op("Relu", [h])
    h = g.reshape_batch(h, [-1])
    logits = g.linear(h, weights(10, 32), weights(10))
    g.op("Softmax", [logits], axis=-1)
    g.nodes[-1].output[0] = "probabilities"
    return model(g, [fp32_input(x, 20)], [out("probabilities", shape=["N", 10])], opset, ir=9 if opset >= 19 else 8), {
        x: ("FP32", RNG.standard_normal((ROWS, 20)) * 2)}


def gemm_mlp():
    # The shape the first comparisons had: Gemm, Relu, Softmax,
    # ArgMax (torch.onnx.export's nn.Linear on 2-D input is a Gemm).
    g = Graph()
    x = "input"
    h = g.op("Relu", [g.op("Gemm", [x, g.const(weights(64, 30)), g.const(weights(64))], transB=1)])
    p = g.op("Softmax", [g.op("Gemm", [h, g.const(weights(5, 64)), g.const(weights(5))], transB=1)], axis=1)
    g.nodes[-1].output[0] = "probabilities"
    g.op("ArgMax", ["probabilities"], axis=1, keepdims=0)
    g.nodes[-1].output[0] = "label"
    return model(g, [fp32_input(x, 30)], [out("probabilities", shape=["N", 5]), out("label", TensorProto.INT64, ["N"])], 13), {
        x: ("FP32", RNG.standard_normal((ROWS, 30)))}


def cnn():
    g = Graph()
    x = "image"
    h = g.op("Conv", [x, g.const(weights(8, 1, 3, 3)), g.const(weights(8))], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    h = g.op("BatchNormalization", [h, g.const((1 + 0.1 * RNG.standard_normal(8)).astype(np.float32)),
                                    g.const((0.1 * RNG.standard_normal(8)).astype(np.float32)),
                                    g.const((0.1 * RNG.standard_normal(8)).astype(np.float32)),
                                    g.const((0.5 + RNG.random(8)).astype(np.float32))], epsilon=1e-5)
    h = g.op("Relu", [h])
    h = g.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])  # 14x14
    h = g.op("Conv", [h, g.const(weights(16, 8, 3, 3)), g.const(weights(16))], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])  # 7x7
    h = g.op("Clip", [h, g.const(np.float32(0)), g.const(np.float32(6))])  # ReLU6
    h = g.op("AveragePool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0)  # 4x4
    h = g.op("LeakyRelu", [h], alpha=0.1)
    h = g.op("Conv", [h, g.const(weights(16, 16, 1, 1))], kernel_shape=[1, 1])
    h = g.op("HardSigmoid", [h], alpha=0.2, beta=0.5)
    h = g.op("GlobalAveragePool", [h])
    h = g.op("Flatten", [h], axis=1)
    g.op("Gemm", [h, g.const(weights(10, 16)), g.const(weights(10))], transB=1)
    g.nodes[-1].output[0] = "logits"
    return model(g, [fp32_input(x, 1, 28, 28)], [out("logits", shape=["N", 10])], 13), {
        x: ("FP32", RNG.random((ROWS, 1, 28, 28)))}


def minilm_layer():
    opset, seq, width, heads, vocab = 17, 16, 32, 4, 100
    dim = width // heads
    g = Graph()
    ids, mask = "input_ids", "attention_mask"
    h = g.op("Gather", [g.const(weights(vocab, width, scale=0.5), "word_embeddings"), ids], axis=0)
    h = g.op("Add", [h, g.const(weights(seq, width, scale=0.1), "position_embeddings")])
    h = g.layer_norm_decomposed(h, width, opset)

    def heads_of(t, perm):
        t = g.reshape_batch(t, [seq, heads, dim])
        return g.op("Transpose", [t], perm=perm)

    q = heads_of(g.linear(h, weights(width, width), weights(width)), [0, 2, 1, 3])
    k = heads_of(g.linear(h, weights(width, width), weights(width)), [0, 2, 3, 1])
    v = heads_of(g.linear(h, weights(width, width), weights(width)), [0, 2, 1, 3])
    scores = g.op("Div", [g.op("MatMul", [q, k]), g.const(np.float32(math.sqrt(dim)))])
    # The extended attention mask: (1 - mask[:, None, None, :]) * -10000.
    m = g.op("Cast", [g.op("Unsqueeze", [mask, g.const(i64(1, 2))])], to=TensorProto.FLOAT)
    m = g.op("Mul", [g.op("Sub", [g.const(np.float32(1)), m]), g.const(np.float32(-10000))])
    probs = g.op("Softmax", [g.op("Add", [scores, m])], axis=-1)
    ctx = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    ctx = g.reshape_batch(ctx, [seq, width])
    h = g.op("Add", [g.linear(ctx, weights(width, width), weights(width)), h])
    h = g.op("LayerNormalization", [h, g.const((1 + 0.1 * RNG.standard_normal(width)).astype(np.float32)),
                                    g.const((0.1 * RNG.standard_normal(width)).astype(np.float32))], axis=-1, epsilon=1e-12)
    f = g.erf_gelu(g.linear(h, weights(64, width), weights(64)))
    h = g.op("Add", [g.linear(f, weights(width, 64), weights(width)), h])
    h = g.layer_norm_decomposed(h, width, opset)
    g.nodes[-1].output[0] = "last_hidden_state"
    ids_data = RNG.integers(1, vocab, (ROWS, seq))
    mask_data = np.ones((ROWS, seq), dtype=np.int64)
    for r in range(ROWS):  # padded rows of different lengths
        n = seq - 2 * r
        mask_data[r, n:] = 0
        ids_data[r, n:] = 0
    inputs = [helper.make_tensor_value_info(ids, TensorProto.INT64, ["N", seq]),
              helper.make_tensor_value_info(mask, TensorProto.INT64, ["N", seq])]
    return model(g, inputs, [out("last_hidden_state", shape=["N", seq, width])], opset), {ids: ("INT64", ids_data), mask: ("INT64", mask_data)}


def sklearn_logreg(multinomial):
    classes, features = 3, 4
    g = Graph()
    x = "input"
    s = g.op("Scaler", [x], domain="ai.onnx.ml", offset=list(RNG.standard_normal(features)), scale=list(0.5 + RNG.random(features)))
    label, probs = g.op("LinearClassifier", [s], domain="ai.onnx.ml", outputs=2,
                        coefficients=list(RNG.standard_normal(classes * features)), intercepts=list(RNG.standard_normal(classes)),
                        classlabels_ints=list(range(classes)), multi_class=1 if multinomial else 0,
                        post_transform="SOFTMAX" if multinomial else "LOGISTIC")
    if not multinomial:  # one-vs-rest: the scores are normalized to sum to 1
        probs = g.op("Normalizer", [probs], domain="ai.onnx.ml", norm="L1")
    g.nodes[[n.op_type for n in g.nodes].index("LinearClassifier")].output[0] = "label"
    g.op("ZipMap", [probs], domain="ai.onnx.ml", classlabels_int64s=list(range(classes)))
    g.nodes[-1].output[0] = "output_probability"
    seq_of_maps = TypeProto()  # seq(map(int64, float)); onnx 1.12's helper has no map types
    seq_of_maps.sequence_type.elem_type.map_type.key_type = TensorProto.INT64
    seq_of_maps.sequence_type.elem_type.map_type.value_type.tensor_type.elem_type = TensorProto.FLOAT
    zipmap = helper.make_value_info("output_probability", seq_of_maps)
    return model(g, [fp32_input(x, features)], [out("label", TensorProto.INT64, ["N"]), zipmap], 13, ml_opset=1), {
        x: ("FP32", RNG.standard_normal((ROWS, features)) * 2)}


def sklearn_linreg():
    features = 5
    g = Graph()
    x = "input"
    n = g.op("Normalizer", [x], domain="ai.onnx.ml", norm="L2")
    g.op("LinearRegressor", [n], domain="ai.onnx.ml", coefficients=list(RNG.standard_normal(features)), intercepts=[0.5], targets=1)
    g.nodes[-1].output[0] = "variable"
    return model(g, [fp32_input(x, features)], [out("variable", shape=["N", 1])], 13, ml_opset=1), {
        x: ("FP32", RNG.standard_normal((ROWS, features)) * 3)}


def random_trees(trees, features, depth, targets):
    """Full binary trees of the given depth, as TreeEnsemble attributes."""
    a = {k: [] for k in ["nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values", "nodes_modes",
                         "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
                         "target_treeids", "target_nodeids", "target_ids", "target_weights"]}
    for t in range(trees):
        inner = 2 ** depth - 1
        for node in range(2 ** (depth + 1) - 1):
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(node)
            if node < inner:
                a["nodes_featureids"].append(int(RNG.integers(features)))
                a["nodes_values"].append(float(RNG.standard_normal()))
                a["nodes_modes"].append("BRANCH_LEQ")
                a["nodes_truenodeids"].append(2 * node + 1)
                a["nodes_falsenodeids"].append(2 * node + 2)
            else:
                a["nodes_featureids"].append(0)
                a["nodes_values"].append(0.0)
                a["nodes_modes"].append("LEAF")
                a["nodes_truenodeids"].append(0)
                a["nodes_falsenodeids"].append(0)
                a["target_treeids"].append(t)
                a["target_nodeids"].append(node)
                a["target_ids"].append(t % targets)
                a["target_weights"].append(float(RNG.standard_normal() * 0.1))
            a["nodes_missing_value_tracks_true"].append(int(RNG.integers(2)))
    return a


def gbt_classifier(classes):
    features, rounds, depth = 6, 50, 3
    trees = rounds * (1 if classes == 2 else classes)
    a = random_trees(trees, features, depth, 1 if classes == 2 else classes)
    a["class_treeids"], a["class_nodeids"], a["class_ids"], a["class_weights"] = (
        a.pop("target_treeids"), a.pop("target_nodeids"), a.pop("target_ids"), a.pop("target_weights"))
    g = Graph()
    x = "input"
    g.op("TreeEnsembleClassifier", [x], domain="ai.onnx.ml", outputs=2, classlabels_int64s=list(range(classes)),
         post_transform="LOGISTIC" if classes == 2 else "SOFTMAX",
         base_values=[float(v) for v in RNG.standard_normal(1 if classes == 2 else classes) * 0.1], **a)
    g.nodes[-1].output[0], g.nodes[-1].output[1] = "label", "probabilities"
    data = RNG.standard_normal((ROWS, features))
    data[0, 2] = np.nan  # a missing value: nodes_missing_value_tracks_true decides
    return model(g, [fp32_input(x, features)], [out("label", TensorProto.INT64, ["N"]), out("probabilities", shape=["N", classes])],
                 13, ml_opset=1), {x: ("FP32", data)}


def gbt_regressor():
    features, trees, depth = 6, 50, 3
    a = random_trees(trees, features, depth, 1)
    a["nodes_modes"] = ["BRANCH_LT" if m != "LEAF" else m for m in a["nodes_modes"]]  # XGBoost's comparison
    g = Graph()
    x = "input"
    g.op("TreeEnsembleRegressor", [x], domain="ai.onnx.ml", n_targets=1, aggregate_function="SUM", base_values=[0.5], **a)
    g.nodes[-1].output[0] = "variable"
    return model(g, [fp32_input(x, features)], [out("variable", shape=["N", 1])], 13, ml_opset=1), {
        x: ("FP32", RNG.standard_normal((ROWS, features)))}


MODELS = {
    "gemm_mlp": gemm_mlp,
    "torch_mlp_opset13": lambda: torch_mlp(13),
    "torch_mlp_opset17": lambda: torch_mlp(17),
    "torch_mlp_gelu20": lambda: torch_mlp(20, gelu20=True),
    "cnn": cnn,
    "minilm_layer": minilm_layer,
    "sklearn_logreg_multinomial": lambda: sklearn_logreg(True),
    "sklearn_logreg_ovr": lambda: sklearn_logreg(False),
    "sklearn_linreg": sklearn_linreg,
    "gbt_binary": lambda: gbt_classifier(2),
    "gbt_multiclass": lambda: gbt_classifier(3),
    "gbt_regressor": gbt_regressor,
}


def without_zipmap(m):
    """m with each ZipMap replaced by an Identity and its output a tensor."""
    r = onnx.ModelProto()
    r.CopyFrom(m)
    for n in r.graph.node:
        if n.op_type == "ZipMap":
            for a in list(n.attribute):
                n.attribute.remove(a)
            n.op_type, n.domain = "Identity", ""
            for o in r.graph.output:
                if o.name == n.output[0]:
                    o.CopyFrom(helper.make_tensor_value_info(o.name, TensorProto.FLOAT, ["N", None]))
    return r


def element(dt, v):
    """One input element as JSON: FP32 as the float32 value the server
    reads (NaN as the string "NaN", as V2 JSON carries it), INT64 as is."""
    if dt != "FP32":
        return int(v)
    v = float(np.float32(v))
    return "NaN" if math.isnan(v) else v


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    inputs, ops = {}, set()
    for name, build in MODELS.items():
        m, data = build()
        ops |= {(n.domain or "ai.onnx", n.op_type) for n in m.graph.node}
        d = os.path.join(root, "repo", name, "1")
        os.makedirs(d, exist_ok=True)
        save(m, os.path.join(d, "model.onnx"))
        if any(n.op_type == "ZipMap" for n in m.graph.node):
            os.makedirs(os.path.join(root, "ort"), exist_ok=True)
            save(without_zipmap(m), os.path.join(root, "ort", name + ".onnx"))
        inputs[name] = {k: {"datatype": dt, "shape": list(v.shape), "data": [element(dt, f) for f in np.asarray(v).ravel()]}
                        for k, (dt, v) in data.items()}
    with open(os.path.join(root, "inputs.json"), "w") as f:
        json.dump(inputs, f, allow_nan=False)
    ops = sorted(ops)
    print(f"{len(MODELS)} models, {len(ops)} operators: " + ", ".join(f"{d}:{o}" for d, o in ops))


if __name__ == "__main__":
    main()
