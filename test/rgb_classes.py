#!/usr/bin/env python3
"""32x32 colour images of three classes, one .npy a class (red.npy, green.npy, blue.npy): noise
with a bright square in the class's channel. Also ROWS.npy: the first rows of the last class, or
with --noise that many rows of noise (inputs to predict that no class owns).

usage: rgb_classes.py DIR PER_CLASS SEED ROWS.npy COUNT [--noise]
"""
import sys

import numpy as np


def main():
    folder, per_class, seed, rows_file, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    rng = np.random.default_rng(seed)
    for c, name in enumerate(["red", "green", "blue"]):
        x = rng.integers(0, 60, (per_class, 32, 32, 3), dtype=np.uint8)
        x[:, 8:24, 8:24, c] = 230
        np.save(f"{folder}/{name}.npy", x)
    noise = "--noise" in sys.argv[6:]
    np.save(rows_file, rng.integers(0, 256, (count, 32, 32, 3), dtype=np.uint8) if noise else x[:count])


if __name__ == "__main__":
    main()
