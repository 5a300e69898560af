#!/usr/bin/python3
"""Regenerates the binary seeds of tests/fuzz/corpus from the JSON seeds and
small ONNX models built here (needs Debian's python3-protobuf, python3-onnx
and protoc). Run from the repository root:

    tests/fuzz/make_seeds.py
"""
import glob
import os
import subprocess
import sys
import tempfile

import onnx
from onnx import TensorProto, helper

CORPUS = "tests/fuzz/corpus"


def proto_module(tmp):
    subprocess.run(["protoc", "-Iproto", "--python_out=" + tmp,
                    "proto/memplan/v1/memplan.proto"], check=True)
    sys.path.insert(0, tmp)
    from memplan.v1 import memplan_pb2  # pylint: disable=import-outside-toplevel
    return memplan_pb2


def onnx_models():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 4], [0.5] * 32)
    mlp = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Relu", ["h"], ["y"], name="relu")],
        "mlp", [x], [y], [w])
    # A shape subgraph feeding Reshape, as exporters emit it.
    shapes = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"], name="shape"),
         helper.make_node("Gather", ["s", "i0"], ["b"], name="gather", axis=0),
         helper.make_node("Concat", ["b", "m1"], ["ns"], name="concat", axis=0),
         helper.make_node("Reshape", ["x", "ns"], ["y"], name="reshape")],
        "shapes", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("i0", TensorProto.INT64, [1], [0]),
         helper.make_tensor("m1", TensorProto.INT64, [1], [-1])])
    # An If whose branches compute different things.
    def branch(op, name):
        return helper.make_graph(
            [helper.make_node(op, ["x"], ["t"], name=name)], name, [],
            [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    cond = helper.make_graph(
        [helper.make_node("If", ["c"], ["z"], name="if",
                          then_branch=branch("Relu", "then_relu"),
                          else_branch=branch("Sigmoid", "else_sig"))],
        "cond", [helper.make_tensor_value_info("c", TensorProto.BOOL, []), x],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    return {"mlp.onnx": mlp, "shape_reshape.onnx": shapes, "if.onnx": cond}


def names_seeds():
    """names_fuzz inputs: a byte of switches (1: buffers, 2: memory pools,
    4: a c_header_id), then names, each a byte of length and its bytes."""
    issue = [b"\xff", b"\xed\xa0\x80", b"\xe0\x80\x80", b"\xf4\x90\x80\x80",
             b"v\xff", b"v\xfe", b"u\xef\xbf\xbe", b"w\\xFF", b"x\ny</title>&",
             b"caf\xc3\xa9 */ ??/"]
    seeds = {
        "issue_graph.bin": (0, issue),
        "issue_buffers.bin": (1, issue),
        "issue_pools.bin": (2, issue),
        "pool_names_meet.bin": (2 | 4, [b"sram.0", b"sram.1", b"sram", b"SRAM",
                                        b"l2-a", b"l2_a", b"\\", b"\\\\x41"]),
        "markup.bin": (0, [b"<svg>", b"]]>", b"&amp;", b"\"'", b"*/#define X 1/*",
                           b"??=", b"\x00\x01\x1f\x7f", b"\xc2\x85\xef\xb7\x90"]),
    }
    out = os.path.join(CORPUS, "names_fuzz")
    os.makedirs(out, exist_ok=True)
    for name, (switches, names) in seeds.items():
        data = bytes([switches]) + b"".join(bytes([len(n)]) + n for n in names)
        open(os.path.join(out, name), "wb").write(data)


def main():
    names_seeds()
    with tempfile.TemporaryDirectory() as tmp:
        pb = proto_module(tmp)
        from google.protobuf import json_format  # pylint: disable=import-outside-toplevel
        out = os.path.join(CORPUS, "plan_request_fuzz")
        for path in glob.glob(os.path.join(CORPUS, "request_json_fuzz", "*.json")):
            request = pb.PlanRequest()
            json_format.Parse(open(path).read(), request)
            name = os.path.basename(path).replace(".json", ".bin")
            open(os.path.join(out, name), "wb").write(request.SerializeToString())
        for name, graph in onnx_models().items():
            data = helper.make_model(
                graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
            open(os.path.join(CORPUS, "onnx_import_fuzz", name), "wb").write(data)
            request = pb.PlanRequest()
            request.model.format = "onnx"
            request.model.name = name
            request.model.data = data
            request.model.dims["batch"] = 2
            open(os.path.join(out, "model_" + name.replace(".onnx", ".bin")),
                 "wb").write(request.SerializeToString())


if __name__ == "__main__":
    main()
