// Runs the ONNX corpus (corpus.py) through ONNX Runtime (the
// onnxruntime-node npm package, CPU) and writes what it computes: the
// references the server's outputs are compared with.
//
// Usage: node reference.cjs CORPUS_DIR
//   (NODE_PATH must hold onnxruntime-node: `make node-clients` installs it)
//
// Writes CORPUS_DIR/expected.json:
//   {"<model>": {"<output>": {"shape": [...], "data": [...flat...]}}}
// with every FP32 value as the float32 ORT computed (NaN, Infinity and
// -Infinity as strings, as V2 JSON carries them), INT64 as numbers. A
// ZipMap output (a sequence of maps, which V2 cannot carry) is the [N, C]
// tensor of its values in class order, the form the server serves it in:
// onnxruntime-node returns no maps, so CORPUS_DIR/ort/<model>.onnx, the
// model with its ZipMap replaced by an Identity, runs instead.
'use strict';

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function jsonNumber(v) {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return 'Infinity';
  if (v === -Infinity) return '-Infinity';
  return v;
}

function tensorOf(spec) {
  if (spec.datatype === 'INT64') {
    return new ort.Tensor('int64', BigInt64Array.from(spec.data.map((v) => BigInt(v))), spec.shape);
  }
  const f = Float32Array.from(spec.data.map((v) => (typeof v === 'string' ? Number(v) : v)));
  return new ort.Tensor('float32', f, spec.shape);
}

function outputOf(v) {
  if (v instanceof ort.Tensor) {
    const data = Array.from(v.data, (x) => (typeof x === 'bigint' ? Number(x) : jsonNumber(x)));
    return { shape: Array.from(v.dims), data };
  }
  throw new Error(`unexpected output ${typeof v}`);
}

async function main() {
  const root = process.argv[2];
  if (!root) throw new Error('usage: node reference.cjs CORPUS_DIR');
  const inputs = JSON.parse(fs.readFileSync(path.join(root, 'inputs.json'), 'utf8'));
  const expected = {};
  for (const [name, feeds] of Object.entries(inputs)) {
    let file = path.join(root, 'ort', `${name}.onnx`); // ZipMap replaced (corpus.py says why)
    if (!fs.existsSync(file)) file = path.join(root, 'repo', name, '1', 'model.onnx');
    const session = await ort.InferenceSession.create(file, {
      executionProviders: ['cpu'], graphOptimizationLevel: 'all', intraOpNumThreads: 1,
    });
    const feed = {};
    for (const [k, spec] of Object.entries(feeds)) feed[k] = tensorOf(spec);
    const outs = await session.run(feed);
    expected[name] = {};
    for (const k of session.outputNames) expected[name][k] = outputOf(outs[k]);
    await session.release();
  }
  fs.writeFileSync(path.join(root, 'expected.json'), JSON.stringify(expected));
  console.log(`${Object.keys(expected).length} models run through onnxruntime-node ${ort.env.versions.node}`);
}

main().catch((e) => { console.error(e); process.exit(1); });
