// TensorFlow.js (its Layers API on the pure JavaScript CPU backend) loads a model that
// `pitrain export --tfjs` wrote, from memory (no network), predicts the rows of a uint8 .npy of
// (N, H, W) or (N, H, W, C) images given as pixels / 255, and compares every class probability with the lines of
// `pitrain predict --json` for the same rows. Prints what it found; exits 1 on any mismatch.
// usage: node tfjs_predict.js MODEL_DIR IMAGES.npy PREDICT.jsonl [TOLERANCE]
'use strict';
const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs-core');
require('@tensorflow/tfjs-backend-cpu');
const tfl = require('@tensorflow/tfjs-layers');

// A C-order uint8 .npy (format 1.0 or 2.0): its shape and bytes.
function readNpyUint8(file) {
  const b = fs.readFileSync(file);
  if (b.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not an .npy file`);
  const v1 = b[6] === 1;
  const headerLength = v1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = (v1 ? 10 : 12) + headerLength;
  const header = b.toString('latin1', v1 ? 10 : 12, start);
  if (!/'descr': '\|u1'/.test(header) || /'fortran_order': True/.test(header))
    throw new Error(`${file}: expected a C-order uint8 array, header ${header}`);
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').filter(s => s.trim()).map(Number);
  return {shape, data: new Uint8Array(b.buffer, b.byteOffset + start, b.length - start)};
}

// model.json parsed by TensorFlow.js itself, its weight files read from the manifest's paths.
async function loadFromFolder(dir) {
  const modelJSON = JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8'));
  const artifacts = await tf.io.getModelArtifactsForJSON(modelJSON, async manifest => {
    const specs = [], files = [];
    for (const group of manifest) {
      specs.push(...group.weights);
      for (const p of group.paths) files.push(fs.readFileSync(path.join(dir, p)));
    }
    const all = Buffer.concat(files);
    return [specs, all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength)];
  });
  return tfl.loadLayersModel(tf.io.fromMemory(artifacts));
}

async function main() {
  const [dir, npy, jsonl, tolerance = '1e-4'] = process.argv.slice(2);
  await tf.setBackend('cpu');
  const model = await loadFromFolder(dir);
  const meta = model.getUserDefinedMetadata();
  console.log(`tfjs ${tf.version_core}, backend ${tf.getBackend()}: layers ${model.layers.map(l => l.getClassName()).join(' ')}`);
  console.log(`input ${JSON.stringify(model.inputs[0].shape)}, output ${JSON.stringify(model.outputs[0].shape)}`);
  const {shape, data} = readNpyUint8(npy);
  const n = shape[0];
  const [h, w, c] = [shape[1], shape[2], shape.length > 3 ? shape[3] : 1];
  const x = tf.tensor4d(Float32Array.from(data, v => v / 255), [n, h, w, c]);
  const probabilities = await model.predict(x).array();
  const expected = fs.readFileSync(jsonl, 'utf8').trim().split('\n').map(line => JSON.parse(line));
  const problems = [];
  if (expected.length !== n) problems.push(`${jsonl} has ${expected.length} lines for ${n} images`);
  let worst = 0, agree = 0;
  for (let i = 0; i < Math.min(n, expected.length); ++i) {
    const names = Object.keys(expected[i].probabilities);
    if (JSON.stringify(names) !== JSON.stringify(meta.class_names))
      problems.push(`line ${i}: classes ${names} differ from the model's class_names ${meta.class_names}`);
    names.forEach((name, c) => { worst = Math.max(worst, Math.abs(probabilities[i][c] - expected[i].probabilities[name])); });
    const best = probabilities[i].indexOf(Math.max(...probabilities[i]));
    if (meta.class_names[best] === expected[i].class) ++agree;
  }
  console.log(`${n} images: max |p_tfjs - p_pitrain| = ${worst.toExponential(2)} (tolerance ${tolerance}), ` +
              `most probable class agrees on ${agree}`);
  if (!(worst <= Number(tolerance))) problems.push(`probabilities differ by ${worst}, more than ${tolerance}`);
  for (const p of problems) console.log(`FAIL: ${p}`);
  process.exit(problems.length ? 1 : 0);
}

main().catch(e => { console.log(`FAIL: ${e.stack || e}`); process.exit(1); });
