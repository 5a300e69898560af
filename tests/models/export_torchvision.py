#!/usr/bin/python3
"""Real models at the size people ship them, made offline for the tests and
the figures: torchvision architectures exported to ONNX by Debian's
python3-torch 1.13 and python3-torchvision 0.14 (random weights: nothing is
downloaded), and one synthetic model over 2 GiB whose weights are ONNX
external data.

    /usr/bin/python3 tests/models/export_torchvision.py CACHE_DIR [NAME...]

NAME is a torchvision.models constructor (resnet18, resnet101, ...),
`external_2g`, or one of FUNCTIONS (an architecture whose blocks are
exported as ONNX functions of the model); without names, every model of
MODELS. Each model is written
to CACHE_DIR/NAME.onnx through a temporary file renamed into place, so a
model that is there is whole; models already there are skipped (and torch
is not even loaded). One line per model on stdout: `NAME PATH SECONDS`
(SECONDS 0 when cached).

external_2g is CACHE_DIR/external_2g/model.onnx (a few kB): Conv and MatMul
nodes whose initializers (2.02 GiB) are all external data in
`weights.bin`, which is a FIFO: nothing is ever written, and a reader that
opens it blocks, so a test that plans it within a timeout proves the
weights were never opened. The shape of the one small constant a Reshape
reads stays inline.

Exit 77 when python3-torch, python3-torchvision or python3-onnx is missing
(scripts/setup.sh installs them), 2 on a bad name.
"""
import os
import stat
import sys
import time

# The tests' set, in the order they run: the architectures issue 29 names
# and one over gRPC's 64 MiB message limit (resnet101, ~170 MB).
MODELS = ["resnet18", "googlenet", "densenet121", "mobilenet_v3_small",
          "efficientnet_b0", "resnet101", "external_2g",
          "resnet18_functions"]
# Models whose modules of one class are exported as functions of the model
# (torch.onnx's export_modules_as_functions, opset 15 and up): name ->
# (architecture, module class in torchvision.models).
FUNCTIONS = {"resnet18_functions": ("resnet18", "resnet.BasicBlock")}
FUNCTIONS_OPSET = 15
EXTERNAL = "external_2g"
# Input side per architecture (224 unless named).
INPUT_SIDE = {"inception_v3": 299}
OPSET = 13


def missing_packages():
    """Debian packages this script needs that are not importable."""
    missing = []
    for module, package in (("torch", "python3-torch"),
                            ("torchvision", "python3-torchvision"),
                            ("onnx", "python3-onnx")):
        try:
            __import__(module)
        except ImportError:
            missing.append(package)
    return missing


def export_torchvision(name, path):
    """torchvision.models.<name>(weights=None), eval, exported at opset 13
    with a 1x3xSxS input (one of FUNCTIONS: its architecture, at opset 15
    with its blocks as functions), into `path` through a temporary file."""
    import torch
    import torchvision

    torch.manual_seed(0)  # the same random weights on every run
    options = {"opset_version": OPSET}
    if name in FUNCTIONS:
        name, module = FUNCTIONS[name]
        owner, cls = module.split(".")
        options = {"opset_version": FUNCTIONS_OPSET,
                   "export_modules_as_functions": {
                       getattr(getattr(torchvision.models, owner), cls)}}
    builder = getattr(torchvision.models, name, None)
    if builder is None:
        raise KeyError(name)
    kwargs = {"weights": None}
    if name in ("googlenet", "inception_v3"):
        kwargs["aux_logits"] = False  # eval drops them anyway
        kwargs["init_weights"] = False  # scipy's truncnorm is slow and unneeded
    model = builder(**kwargs).eval()
    side = INPUT_SIDE.get(name, 224)
    x = torch.randn(1, 3, side, side)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        with torch.no_grad():
            torch.onnx.export(model, x, tmp, input_names=["input"],
                              output_names=["logits"], **options)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def external_model():
    """The 2 GiB model's ModelProto: x[1,4096] -> MatMul w1[4096,65536]
    (1 GiB) -> Relu -> MatMul w2[65536,4096] (1 GiB) -> Reshape to
    [1,4096,1,1] (its shape inline) -> Conv w3[1024,4096,1,1] (16 MiB) +
    b3 -> Relu -> y[1,1024,1,1]. Every float initializer is external data
    in weights.bin, laid out one after the other."""
    from onnx import TensorProto, helper

    float_weights = [("w1", [4096, 65536]), ("w2", [65536, 4096]),
                     ("w3", [1024, 4096, 1, 1]), ("b3", [1024])]
    initializers, offset = [], 0
    for name, dims in float_weights:
        length = 4
        for d in dims:
            length *= d
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "weights.bin"),
                           ("offset", str(offset)), ("length", str(length))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        initializers.append(t)
        offset += length
    initializers.append(helper.make_tensor("shape", TensorProto.INT64, [4],
                                           [1, 4096, 1, 1]))
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="fc1"),
        helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
        helper.make_node("MatMul", ["a1", "w2"], ["h2"], name="fc2"),
        helper.make_node("Reshape", ["h2", "shape"], ["h2_4d"],
                         name="to_4d"),
        helper.make_node("Conv", ["h2_4d", "w3", "b3"], ["h3"], name="conv",
                         kernel_shape=[1, 1]),
        helper.make_node("Relu", ["h3"], ["y"], name="relu2"),
    ]
    graph = helper.make_graph(
        nodes, EXTERNAL, [helper.make_tensor_value_info(
            "x", TensorProto.FLOAT, [1, 4096])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       [1, 1024, 1, 1])],
        initializer=initializers)
    return helper.make_model(graph, producer_name="memplan-tests",
                             opset_imports=[helper.make_opsetid("", OPSET)])


def export_external(folder):
    """folder/model.onnx and the FIFO folder/weights.bin; returns the
    model's path. The FIFO comes first, so a model that is there always
    has it."""
    import onnx

    os.makedirs(folder, exist_ok=True)
    fifo = os.path.join(folder, "weights.bin")
    if os.path.lexists(fifo) and not stat.S_ISFIFO(os.lstat(fifo).st_mode):
        os.remove(fifo)
    if not os.path.lexists(fifo):
        os.mkfifo(fifo)
    path = os.path.join(folder, "model.onnx")
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        # Written as bytes: onnx.save_model would look at weights.bin.
        with open(tmp, "wb") as f:
            f.write(external_model().SerializeToString())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    onnx.load(path, load_external_data=False)  # it parses
    return path


def model_path(cache, name):
    """Where `name` is (or will be) exported under `cache`."""
    if name == EXTERNAL:
        return os.path.join(cache, EXTERNAL, "model.onnx")
    return os.path.join(cache, name + ".onnx")


def exported(path, name):
    """Whether `name` is whole at `path` (external_2g: with its FIFO)."""
    if not os.path.exists(path):
        return False
    if name != EXTERNAL:
        return True
    fifo = os.path.join(os.path.dirname(path), "weights.bin")
    return os.path.lexists(fifo) and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    cache, names = argv[1], argv[2:] or MODELS
    os.makedirs(cache, exist_ok=True)
    for name in names:
        path = model_path(cache, name)
        if exported(path, name):
            print("%s %s 0" % (name, path), flush=True)
            continue
        missing = missing_packages()
        if missing:
            print("export_torchvision: %s not installed: run "
                  "scripts/setup.sh or apt-get install -y "
                  "--no-install-recommends %s" %
                  (", ".join(missing), " ".join(missing)), file=sys.stderr)
            return 77
        start = time.monotonic()
        try:
            if name == EXTERNAL:
                export_external(os.path.dirname(path))
            else:
                export_torchvision(name, path)
        except KeyError:
            print("export_torchvision: torchvision.models has no %r" % name,
                  file=sys.stderr)
            return 2
        print("%s %s %.1f" % (name, path, time.monotonic() - start),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
