// `pitrain export`: a checkpoint's model in a form other tools run.
#pragma once
#include <string>

#include "pitrain/checkpoint.h"

namespace pitrain {

// A TensorFlow.js Layers model, which tf.loadLayersModel loads in a browser or Node:
// DIR/model.json (the Keras topology of keras.h, the weights manifest, and userDefinedMetadata
// with the class names and the input convention) and DIR/group1-shard1of1.bin (the weights,
// float32 little-endian, in manifest order). Makes DIR if needed; Error naming the file on failure.
void export_tfjs(const Checkpoint& ckpt, const std::string& dir);

}  // namespace pitrain
