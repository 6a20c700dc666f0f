"""A checkpoint read the way Keras' model.load_weights("x.h5") reads it (Keras 3's
legacy_h5_format.load_weights_from_hdf5_group, tf.keras 2's hdf5_format): the group with
layer_names (the file's root, else /model_weights), in it a group a layer whose weight_names
attribute names its datasets in order. Checks the names and shapes Keras' own layers would have
(the Keras model code of the README), and that the values are those of the TensorFlow.js export,
which TensorFlow.js ran. usage: keras_layout.py CHECKPOINT TFJS_DIR KERAS_LAYERS
KERAS_LAYERS: the expected layers as name:shape,shape;... e.g. "conv2d:3x3x1x32,32;max_pooling2d:".
"""
import json, os, sys

import h5py
import numpy as np

path, tfjs_dir, spec = sys.argv[1:4]
expected = []  # (layer name, [weight shapes])
for item in spec.split(";"):
    name, shapes = item.split(":")
    expected.append((name, [tuple(int(d) for d in s.split("x")) for s in shapes.split(",") if s]))

def text(v):
    # As Keras writes them, numpy bytes: older Keras calls .decode("utf8") on each without asking.
    assert isinstance(v, bytes), f"{v!r} reads back as {type(v).__name__}, not bytes as Keras writes it"
    return v.decode("utf8")

f = h5py.File(path, "r")
g = f if "layer_names" in f.attrs else f["model_weights"]  # what load_weights does
assert text(g.attrs["backend"]) == "tensorflow", g.attrs["backend"]
assert text(g.attrs["keras_version"]).startswith("2."), g.attrs["keras_version"]
layer_names = [text(n) for n in g.attrs["layer_names"]]
assert text(f.attrs["keras_version"]) == text(g.attrs["keras_version"]) and text(f.attrs["backend"]) == "tensorflow"
assert layer_names == [n for n, _ in expected], f"layer_names {layer_names}, Keras would name them {[n for n, _ in expected]}"
values = []
for name, shapes in expected:
    weight_names = [text(n) for n in g[name].attrs["weight_names"]]
    want = [f"{name}/{w}:0" for w in ("kernel", "bias")[:len(shapes)]]
    assert weight_names == want, f"{name}: weight_names {weight_names}, Keras has {want}"
    for w, shape in zip(weight_names, shapes):
        d = g[name][w]
        assert d.dtype == np.float32 and d.shape == shape, f"{name}/{w}: {d.dtype} {d.shape}, Keras has float32 {shape}"
        values.append(np.asarray(d).ravel())

model = json.load(open(os.path.join(tfjs_dir, "model.json")))
(group,) = model["weightsManifest"]
shard = np.concatenate([np.fromfile(os.path.join(tfjs_dir, p), dtype="<f4") for p in group["paths"]])
assert np.array_equal(np.concatenate(values), shard), "the checkpoint's weights differ from the TensorFlow.js export's"
print(f"keras layout: {path}: layer_names {layer_names}, {len(values)} weights as Keras names them, "
      f"equal to the TensorFlow.js shard")
