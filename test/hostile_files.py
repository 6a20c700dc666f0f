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
