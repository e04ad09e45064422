// A minimal Open Inference Protocol (V2) REST server over ONNX Runtime
// (onnxruntime-node, CPU), written with Node's http module: the baseline
// docs/BENCHMARKS.md compares llmserve's tensor models with. It serves the
// models of a repository (<dir>/<model>/1/model.onnx), one session per
// model, every request run as it comes (no batching), and speaks the part
// of V2 that `llmserve bench --backend v2-infer` uses:
//
//   GET  /v2/health/ready
//   GET  /v2/models/<model>          metadata: inputs and outputs
//   POST /v2/models/<model>/infer    JSON, or the binary tensor data
//                                    extension (Inference-Header-Content-Length);
//                                    FP32 inputs; outputs as JSON, or binary
//                                    when binary_data_output is asked for
//
// Usage: node ort-server.cjs REPO_DIR PORT [THREADS]
//   (NODE_PATH must hold onnxruntime-node: `make node-clients` installs it)
// It is a benchmark baseline, not part of llmserve.
'use strict';

const fs = require('fs');
const http = require('http');
const path = require('path');
const ort = require('onnxruntime-node');

const [root, port, threads] = [process.argv[2], Number(process.argv[3] || 8090), Number(process.argv[4] || 0)];
const sessions = {};

const dtypes = { float32: 'FP32', int64: 'INT64', float64: 'FP64', int32: 'INT32' };

function metadataOf(name, s) {
  const io = (names, meta) => names.map((n, i) => {
    const m = meta[i] || {};
    return { name: n, datatype: dtypes[m.type] || 'FP32', shape: (m.shape || []).map((d) => (typeof d === 'number' ? d : -1)) };
  });
  return { name, versions: ['1'], platform: 'onnxruntime_onnx', inputs: io(s.inputNames, s.inputMetadata || []), outputs: io(s.outputNames, s.outputMetadata || []) };
}

function send(res, code, body, headers = {}) {
  res.writeHead(code, { 'Content-Type': 'application/json', ...headers });
  res.end(body);
}

async function infer(name, s, body, headerLength) {
  const header = JSON.parse(body.subarray(0, headerLength || body.length).toString('utf8'));
  let off = headerLength || body.length;
  const feeds = {};
  for (const input of header.inputs) {
    let data;
    const size = input.parameters && input.parameters.binary_data_size;
    if (size !== undefined) {
      const bytes = body.subarray(off, off + size);
      off += size;
      data = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + size));
    } else {
      data = Float32Array.from(input.data.flat(Infinity));
    }
    feeds[input.name] = new ort.Tensor('float32', data, input.shape);
  }
  const outs = await s.run(feeds);
  const binary = header.parameters && header.parameters.binary_data_output;
  const outputs = [];
  const parts = [];
  for (const k of s.outputNames) {
    const t = outs[k];
    const dt = dtypes[t.type] || t.type;
    if (binary) {
      const b = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
      outputs.push({ name: k, datatype: dt, shape: t.dims, parameters: { binary_data_size: b.length } });
      parts.push(b);
    } else {
      outputs.push({ name: k, datatype: dt, shape: t.dims, data: Array.from(t.data, (x) => (typeof x === 'bigint' ? Number(x) : x)) });
    }
  }
  const json = Buffer.from(JSON.stringify({ model_name: name, model_version: '1', outputs }));
  return binary ? { body: Buffer.concat([json, ...parts]), headers: { 'Inference-Header-Content-Length': String(json.length), 'Content-Type': 'application/octet-stream' } }
    : { body: json, headers: {} };
}

async function main() {
  for (const name of fs.readdirSync(root)) {
    const file = path.join(root, name, '1', 'model.onnx');
    if (!fs.existsSync(file)) continue;
    try {
      sessions[name] = await ort.InferenceSession.create(file, { executionProviders: ['cpu'], graphOptimizationLevel: 'all', intraOpNumThreads: threads });
    } catch (e) {
      console.error(`${name}: ${e.message}`);
    }
  }
  http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const m = req.url.match(/^\/v2\/models\/([^/]+)(\/versions\/1)?(\/infer)?$/);
      if (req.url === '/v2/health/ready') return send(res, 200, '{}');
      if (!m || !sessions[m[1]]) return send(res, 404, JSON.stringify({ error: `no model at ${req.url}` }));
      const s = sessions[m[1]];
      if (!m[3]) return send(res, 200, JSON.stringify(metadataOf(m[1], s)));
      try {
        const hl = Number(req.headers['inference-header-content-length'] || 0);
        const out = await infer(m[1], s, Buffer.concat(chunks), hl);
        send(res, 200, out.body, out.headers);
      } catch (e) {
        send(res, 400, JSON.stringify({ error: e.message }));
      }
    });
  }).listen(port, '127.0.0.1', () => console.log(`onnxruntime-node ${ort.env.versions.node} serving ${Object.keys(sessions).join(', ')} on 127.0.0.1:${port}`));
}

main().catch((e) => { console.error(e); process.exit(1); });
