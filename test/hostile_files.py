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
with open(path("good.pgm"), "wb") as f:
    f.write(b"P5\n28 28\n255\n" + bytes(784))


# Damaged checkpoints: copies of m.h5 with one attribute or dataset changed.
def checkpoint(name, change):
    out = path("ckpt", name + ".h5")
    with open(path("m.h5"), "rb") as src, open(out, "wb") as dst:
        dst.write(src.read())
    with h5py.File(out, "r+") as f:
        change(f)


def set_attr(key, value):
    return lambda f: f.attrs.__setitem__(key, value)


for key in ("epoch_step", "epoch", "step", "iterations"):
    for tag, value in (("neg", -7.0), ("nan", float("nan")), ("inf", float("inf")), ("half", 1.5), ("big", 1e300)):
        checkpoint(f"{key}-{tag}", set_attr(key, value))
for tag, value in (("abc", "abc"), ("empty", ""), ("neg", "-1"), ("big", "99999999999999999999999"), ("space", "7 ")):
    checkpoint(f"seed-{tag}", set_attr("seed", value))
checkpoint("classes-4", set_attr("class_names", [b"a", b"b", b"c", b"d"]))
checkpoint("classes-1", set_attr("class_names", [b"a"]))
checkpoint("classes-dup", set_attr("class_names", [b"a", b"b", b"a"]))
checkpoint("classes-empty", set_attr("class_names", [b"a", b"", b"c"]))
checkpoint("spec-bad", set_attr("model_spec", "dense(3,softmax) flatten"))
checkpoint("spec-huge", set_attr("model_spec", "flatten dense(1000000000) dense(classes,softmax)"))


def weights_nan(f):
    k = f["model_weights/dense/kernel"]
    k[0, 0] = float("nan")


checkpoint("weights-nan", weights_nan)
for tag, n in (("1e9", 10**9), ("3e6", 3 * 10**6), ("short", 7)):
    def big_state(f, n=n):  # chunked and never written: the file stays small, the declared size is not
        del f["optimizer_weights/m"]
        f.create_dataset("optimizer_weights/m", shape=(n,), dtype="f4", chunks=(min(n, 1024),))
    checkpoint(f"state-{tag}", big_state)
