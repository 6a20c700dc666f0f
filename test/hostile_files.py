"""Writes the bad files test/hostile.sh feeds to pitrain, each class in several sizes and values,
next to a few good ones (a dataset, a checkpoint, .npy and IDX folders) to start from.
Usage: hostile_files.py DIR (needs h5py and numpy)."""
import os
import struct
import subprocess
import sys

import h5py
import numpy as np

d = sys.argv[1]
pitrain = os.environ["PITRAIN"]
rng = np.random.default_rng(13)


def path(*parts):
    p = os.path.join(d, *parts)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    return p


# Good inputs: three .npy classes, an IDX folder, a dataset and a checkpoint made from them.
for c in "bca":
    np.save(path("npy", c + ".npy"), rng.integers(0, 256, (40, 784), dtype=np.uint8))
np.save(path("one", "a.npy"), rng.integers(0, 256, (40, 784), dtype=np.uint8))
for stem, n in (("train", 60), ("t10k", 20)):
    with open(path("idx", stem + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">BBBBIII", 0, 0, 8, 3, n, 28, 28) + rng.integers(0, 256, n * 784, dtype=np.uint8).tobytes())
    with open(path("idx", stem + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">BBBBI", 0, 0, 8, 1, n) + bytes([i % 3 for i in range(n)]))
subprocess.run([pitrain, "prepare", "--npy", path("npy"), "--out", path("d.h5")], check=True, stdout=subprocess.DEVNULL)
subprocess.run([pitrain, "train", "--data", path("d.h5"), "--model", "mlp", "--steps-per-epoch", "2", "--threads", "1",
                "--checkpoint", path("m.h5")], check=True, stdout=subprocess.DEVNULL)
# The smallest model predict takes, for a run that is mostly reading (a million rows).
subprocess.run([pitrain, "train", "--data", path("d.h5"), "--model", "flatten dense(classes,softmax)", "--steps-per-epoch", "1",
                "--threads", "1", "--checkpoint", path("tiny.h5")], check=True, stdout=subprocess.DEVNULL)
with open(path("good.pgm"), "wb") as f:
    f.write(b"P5\n28 28\n255\n" + bytes(784))


# Damaged checkpoints: copies of m.h5 with one attribute or dataset changed.
def checkpoint(name, change, folder="ckpt"):
    out = path(folder, name + ".h5")
    with open(path("m.h5"), "rb") as src, open(out, "wb") as dst:
        dst.write(src.read())
    with h5py.File(out, "r+") as f:
        change(f)


def set_attr(key, value):
    return lambda f: f.attrs.__setitem__(key, value)


for key in ("epoch_step", "steps_per_epoch", "epoch", "step", "iterations"):
    for tag, value in (("neg", -7.0), ("nan", float("nan")), ("inf", float("inf")), ("half", 1.5), ("big", 1e300), ("array", np.zeros(4096))):
        checkpoint(f"{key}-{tag}", set_attr(key, value))
for tag, value in (("abc", "abc"), ("empty", ""), ("neg", "-1"), ("big", "99999999999999999999999"), ("space", "7 ")):
    checkpoint(f"seed-{tag}", set_attr("seed", value))
checkpoint("classes-4", set_attr("class_names", [b"a", b"b", b"c", b"d"]))
checkpoint("classes-1", set_attr("class_names", [b"a"]))
checkpoint("classes-dup", set_attr("class_names", [b"a", b"b", b"a"]))
checkpoint("classes-empty", set_attr("class_names", [b"a", b"", b"c"]))
checkpoint("spec-bad", set_attr("model_spec", "dense(3,softmax) flatten"))
checkpoint("spec-huge", set_attr("model_spec", "flatten dense(1000000000) dense(classes,softmax)"))
# Specs whose parameters fit in memory (a few hundred MB) but whose weights the file does not hold.
checkpoint("spec-wide", set_attr("model_spec", "flatten dense(100000) dense(classes,softmax)"))
checkpoint("spec-wider", set_attr("model_spec", "flatten dense(100000000) dense(classes,softmax)"))
with h5py.File(path("ckpt", "spec-only.h5"), "w") as f:  # a few KB: the attributes and no weights
    f.attrs["model_spec"] = "flatten dense(100000) dense(classes,softmax)"
    f.attrs["class_names"] = [b"a", b"b", b"c"]
    f.create_group("model_weights").attrs["layer_names"] = [b"flatten", b"dense", b"dense_1"]
# Every weight there, in its shape (zeros, compressed: under 100 KB), but the activations of a
# 1x1 convolution to 4096 channels: 100 MB an image, 26 GB for evaluate's batch of 256.
with h5py.File(path("activations.h5"), "w") as f:
    f.attrs["model_spec"] = "conv2d(4096,1) flatten dense(3,softmax)"
    f.attrs["class_names"] = [b"a", b"b", b"c"]
    g = f.create_group("model_weights")
    g.attrs["layer_names"] = [b"conv2d", b"flatten", b"dense"]
    for name, shape in (("conv2d/conv2d/kernel:0", (1, 1, 1, 4096)), ("conv2d/conv2d/bias:0", (4096,)),
                        ("dense/dense/kernel:0", (28 * 28 * 4096, 3)), ("dense/dense/bias:0", (3,))):
        g.create_dataset(name, data=np.zeros(shape, dtype="f4"), compression="gzip", chunks=True)


def weights_nan(f):
    k = f["model_weights/dense/dense/kernel:0"]
    k[0, 0] = float("nan")


checkpoint("weights-nan", weights_nan)
checkpoint("weights-missing", lambda f: f.__delitem__("model_weights/dense_1/dense_1/bias:0"))


# A checkpoint from before the Keras layout: /model_weights/<layer>/kernel, no Keras attributes.
def before_keras(f):
    g = f["model_weights"]
    for layer in list(g):
        for name in list(g[layer].attrs["weight_names"]):
            name = name.decode() if hasattr(name, "decode") else name
            g.move(f"{layer}/{name}", f"{layer}/{name.split('/')[1][:-2]}")
        if layer in g[layer]:
            del g[layer][layer]
        del g[layer].attrs["weight_names"]
    for key in ("layer_names", "backend", "keras_version"):
        del g.attrs[key]


checkpoint("before-keras", before_keras, folder=".")
for tag, n in (("1e9", 10**9), ("3e6", 3 * 10**6), ("short", 7)):
    def big_state(f, n=n):  # chunked and never written: the file stays small, the declared size is not
        del f["optimizer_weights/m"]
        f.create_dataset("optimizer_weights/m", shape=(n,), dtype="f4", chunks=(min(n, 1024),))
    checkpoint(f"state-{tag}", big_state)


# Datasets that lie or hold what train would misread.
def dataset(name, train_images=None, train_labels=None, class_names=(b"a", b"b", b"c"), **create):
    with h5py.File(path("data", name + ".h5"), "w", libver="latest") as f:  # attributes past 64 KB
        f.attrs["class_names"] = list(class_names)
        for split, n in (("train", 60), ("val", 20)):
            f[f"{split}/images"] = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
            f[f"{split}/labels"] = np.arange(n, dtype=np.int32) % 3
        if train_images is not None:
            del f["train/images"]
            f.create_dataset("train/images", data=train_images, **create)
        if train_labels is not None:
            del f["train/labels"]
            f["train/labels"] = train_labels


def sparse(n):  # a shape of n images, chunked, nothing written: a few KB on disk
    def make(name):
        with h5py.File(path("data", name + ".h5"), "w") as f:
            f.attrs["class_names"] = [b"a", b"b", b"c"]
            for split in ("train", "val"):
                f.create_dataset(f"{split}/images", shape=(n, 28, 28), dtype="u1", chunks=(1, 28, 28))
                f.create_dataset(f"{split}/labels", shape=(n,), dtype="i4", chunks=(1024,))
    return make


for n in (3 * 10**6, 10**8):
    sparse(n)(f"sparse-{n}")
# Class names a terminal would run, too long, too many, not UTF-8, or repeated far apart.
dataset("names-escape", class_names=[b"a\x1b]0;pwned\x07", b"b\x1b[2J", b"c"])
dataset("names-c1", class_names=[b"a\xc2\x9b2J", b"b", b"c"])
dataset("names-latin1", class_names=[b"caf\xe9", b"b", b"c"])
dataset("names-long", class_names=[b"a" * 300, b"b", b"c"])
dataset("names-many", class_names=[str(i).encode() for i in range(1000000)])
dataset("names-40000-dup", class_names=[str(i).encode() for i in range(40000)] + [b"0"])
dataset("names-utf8", class_names=["café".encode(), "Äpfel".encode(), "梨".encode()])
checkpoint("classes-escape", set_attr("class_names", [b"a\x1b]0;pwned\x07", b"b", b"c"]))
dataset("int8", train_images=rng.integers(-128, 128, (60, 28, 28), dtype=np.int8))
dataset("lzf", train_images=rng.integers(0, 256, (60, 28, 28), dtype=np.uint8), compression="lzf")
for tag, value in (("2pow32", 2**32), ("neg", -1), ("big", 2**62)):
    labels = np.arange(60, dtype=np.int64) % 3
    labels[7] = value
    dataset(f"label-{tag}", train_labels=labels)

# Images and .npy files whose headers lie.
for tag, header in (("p2-huge", b"P2\n99999 99999\n255\n1 2 3\n"), ("p5-huge", b"P5\n2000000000 2000000000\n255\n"),
                    ("p5-wide", b"P5\n40000 1\n255\n"), ("p5-over-maxval", b"P5\n28 28\n15\n" + bytes([200] * 784))):
    with open(path("img", tag + ".pgm"), "wb") as f:
        f.write(header)
import zlib  # noqa: E402


def png(name, w, h, rows=b""):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    with open(path("img", name + ".png"), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))


png("huge", 40000, 40000, b"\0" * (40001 * 200))  # a few rows of the 1.6 GB; the header is what matters
png("wide", 100000, 1, b"\0" * 100001)


def npy_header(shape_text):  # a version 1 .npy header of uint8 rows, as numpy writes it
    header = ("{'descr': '|u1', 'fortran_order': False, 'shape': %s, }" % shape_text).encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def npy(name, shape_text, data=b""):
    with open(path("badnpy", name + ".npy"), "wb") as f:
        f.write(npy_header(shape_text) + data)


npy("neg-rows", "(-1, 784)", bytes(784))
npy("zero-rows", "(0, 784)")
npy("long-header", "(" + " " * 60000 + "1, 784)", bytes(784))  # the regex would recurse a character deep


# Gzip bombs: a header declaring 10 images, then 300 MB of zeros that gzip packs into 300 KB.
import gzip  # noqa: E402


def bomb(file, head):
    with gzip.open(file, "wb", compresslevel=9) as f:
        f.write(head)
        for _ in range(300):
            f.write(bytes(1 << 20))


bomb(path("bomb", "npy", "bomb.npy"), npy_header("(10, 784)"))
bomb(path("bomb", "idx", "train-images-idx3-ubyte.gz"), struct.pack(">BBBBIII", 0, 0, 8, 3, 10, 28, 28))
with open(path("bomb", "idx", "train-labels-idx1-ubyte"), "wb") as f:
    f.write(struct.pack(">BBBBI", 0, 0, 8, 1, 10) + bytes(10))
npy("neg-cols", "(1, -784)", bytes(784))
npy("huge-rows", "(1000000000, 784)", bytes(784))
# A million rows of zeros, gzip, as its header says: a few MB on disk, 784 MB inflated.
with gzip.open(path("million", "zeros.npy"), "wb", compresslevel=1) as f:
    f.write(npy_header("(1000000, 784)"))
    for _ in range(1000):
        f.write(bytes(784 * 1000))
