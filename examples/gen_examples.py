#!/usr/bin/env python3
"""Writes the bundled example graphs as memplan PlanRequest JSON.

resnet50.json: ResNet-50 v1.5 inference, batch 1, 3x224x224, float32, with
conv weights and biases (batch norm folded into the convs, as inference
converters do). transformer_encoder.json: one BERT-base encoder block,
sequence 128, hidden 768, 12 heads, FFN 3072, float32.

Run: python3 examples/gen_examples.py   (rewrites both files)
"""
import json
import os

F32 = 4


class Graph:
    def __init__(self, name):
        self.name, self.tensors, self.ops = name, [], []
        self.inputs, self.outputs = [], []
        self._n = 0

    def tensor(self, name, *shape):
        size = F32
        for d in shape:
            size *= d
        self.tensors.append({"name": name, "size_bytes": size})
        return name

    def op(self, name, inputs, outputs):
        self.ops.append({"name": name, "inputs": inputs, "outputs": outputs})

    def request(self):
        graph = {"name": self.name, "tensors": self.tensors, "ops": self.ops,
                 "inputs": self.inputs, "outputs": self.outputs}
        return {"graph": graph, "options": {"alignment": 64}}


def conv(g, name, x, cin, cout, k, h, w, relu=True):
    """A conv (+ folded BN) with weights and bias, optionally + relu."""
    wt = g.tensor(name + ".weight", cout, cin, k, k)
    b = g.tensor(name + ".bias", cout)
    y = g.tensor(name + ".out", 1, cout, h, w)
    g.op(name, [x, wt, b], [y])
    if not relu:
        return y
    r = g.tensor(name + ".relu", 1, cout, h, w)
    g.op(name + "_relu", [y], [r])
    return r


def resnet50():
    g = Graph("resnet50")
    x = g.tensor("input", 1, 3, 224, 224)
    g.inputs.append(x)
    x = conv(g, "conv1", x, 3, 64, 7, 112, 112)
    pooled = g.tensor("maxpool.out", 1, 64, 56, 56)
    g.op("maxpool", [x], [pooled])
    x, cin, size = pooled, 64, 56
    stages = [(64, 3), (128, 4), (256, 6), (512, 3)]
    for s, (width, blocks) in enumerate(stages):
        for b in range(blocks):
            stride = 2 if (b == 0 and s > 0) else 1
            out_size = size // stride
            prefix = "layer%d.%d" % (s + 1, b)
            y = conv(g, prefix + ".conv1", x, cin, width, 1, size, size)
            y = conv(g, prefix + ".conv2", y, width, width, 3, out_size, out_size)
            y = conv(g, prefix + ".conv3", y, width, width * 4, 1, out_size,
                     out_size, relu=False)
            shortcut = x
            if b == 0:
                shortcut = conv(g, prefix + ".downsample", x, cin, width * 4, 1,
                                out_size, out_size, relu=False)
            added = g.tensor(prefix + ".add", 1, width * 4, out_size, out_size)
            g.op(prefix + ".add", [y, shortcut], [added])
            x = g.tensor(prefix + ".relu", 1, width * 4, out_size, out_size)
            g.op(prefix + ".relu", [added], [x])
            cin, size = width * 4, out_size
    pooled = g.tensor("avgpool.out", 1, 2048)
    g.op("avgpool", [x], [pooled])
    fc_w = g.tensor("fc.weight", 1000, 2048)
    fc_b = g.tensor("fc.bias", 1000)
    logits = g.tensor("fc.out", 1, 1000)
    g.op("fc", [pooled, fc_w, fc_b], [logits])
    probs = g.tensor("softmax.out", 1, 1000)
    g.op("softmax", [logits], [probs])
    g.outputs.append(probs)
    return g


def transformer_encoder(seq=128, hidden=768, heads=12, ffn=3072):
    g = Graph("bert_base_encoder_block")
    x = g.tensor("hidden_in", 1, seq, hidden)
    mask = g.tensor("attention_mask", 1, 1, 1, seq)
    g.inputs += [x, mask]

    def linear(name, inp, cin, cout):
        w = g.tensor(name + ".weight", cin, cout)
        b = g.tensor(name + ".bias", cout)
        y = g.tensor(name + ".out", 1, seq, cout)
        g.op(name, [inp, w, b], [y])
        return y

    def layernorm(name, inp):
        gamma = g.tensor(name + ".gamma", hidden)
        beta = g.tensor(name + ".beta", hidden)
        y = g.tensor(name + ".out", 1, seq, hidden)
        g.op(name, [inp, gamma, beta], [y])
        return y

    head = hidden // heads
    q = linear("attn.query", x, hidden, hidden)
    k = linear("attn.key", x, hidden, hidden)
    v = linear("attn.value", x, hidden, hidden)
    qh, kh, vh = (g.tensor(n, 1, heads, seq, head) for n in ("q_heads", "k_heads_t", "v_heads"))
    g.op("split_q", [q], [qh])
    g.op("split_k_transpose", [k], [kh])
    g.op("split_v", [v], [vh])
    scores = g.tensor("attn.scores", 1, heads, seq, seq)
    g.op("attn.qk_matmul", [qh, kh], [scores])
    scaled = g.tensor("attn.scaled", 1, heads, seq, seq)
    g.op("attn.scale_mask", [scores, mask], [scaled])
    probs = g.tensor("attn.probs", 1, heads, seq, seq)
    g.op("attn.softmax", [scaled], [probs])
    ctx = g.tensor("attn.context", 1, heads, seq, head)
    g.op("attn.pv_matmul", [probs, vh], [ctx])
    merged = g.tensor("attn.merged", 1, seq, hidden)
    g.op("merge_heads", [ctx], [merged])
    proj = linear("attn.output", merged, hidden, hidden)
    res1 = g.tensor("attn.residual", 1, seq, hidden)
    g.op("attn.add", [proj, x], [res1])
    ln1 = layernorm("attn.layernorm", res1)
    inter = linear("ffn.intermediate", ln1, hidden, ffn)
    act = g.tensor("ffn.gelu", 1, seq, ffn)
    g.op("ffn.gelu", [inter], [act])
    out = linear("ffn.output", act, ffn, hidden)
    res2 = g.tensor("ffn.residual", 1, seq, hidden)
    g.op("ffn.add", [out, ln1], [res2])
    y = layernorm("ffn.layernorm", res2)
    g.outputs.append(y)
    return g


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for graph, file in ((resnet50(), "resnet50.json"),
                        (transformer_encoder(), "transformer_encoder.json")):
        with open(os.path.join(here, file), "w") as f:
            json.dump(graph.request(), f, indent=1)
            f.write("\n")
        print("wrote %s: %d tensors, %d ops" % (file, len(graph.tensors), len(graph.ops)))


if __name__ == "__main__":
    main()
