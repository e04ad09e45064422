"""Tests of llmserve_runtime and the example model, through a real gRPC
server on a Unix socket. Run: /usr/bin/python3 -m unittest discover -s runtimes/python/tests"""

import asyncio
import os
import struct
import sys
import tempfile
import unittest

import grpc
import numpy as np
from google.protobuf import empty_pb2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples", "numpy_model"))

from llmserve_runtime import (NumpyCodec, Parameters, RequestInput, Settings, StringCodec)  # noqa: E402
from llmserve_runtime import open_inference_grpc_pb2 as pb  # noqa: E402
from llmserve_runtime.server import decode_bytes, encode_bytes  # noqa: E402
from model import LinearModel  # noqa: E402
from served import infer_stub, serve, text_stub, use_settings  # noqa: E402


class CodecTest(unittest.TestCase):
    def test_numpy_round_trip(self):
        for arr in (np.arange(6, dtype=np.float32).reshape(2, 3), np.array([[True, False]]),
                    np.array([1, -2], dtype=np.int16), np.array([1.5], dtype=np.float16)):
            out = NumpyCodec.encode_output("t", arr)
            self.assertEqual(out.shape, list(arr.shape))
            back = NumpyCodec.decode_output(out)
            np.testing.assert_array_equal(back, arr)
            self.assertEqual(back.dtype, arr.dtype)
        self.assertEqual(NumpyCodec.encode_output("t", np.zeros(1, np.uint64)).datatype, "UINT64")

    def test_string(self):
        out = StringCodec.encode_output("s", ["héllo", "x"])
        self.assertEqual((out.shape, out.datatype, out.data), ([2, 1], "BYTES", ["héllo".encode(), b"x"]))
        self.assertEqual(StringCodec.decode_output(out), ["héllo", "x"])
        self.assertEqual(out.parameters.content_type, "str")
        with self.assertRaises(ValueError):
            StringCodec.decode_input(RequestInput("n", [1], "FP32", np.zeros(1, np.float32)))

    def test_bytes_wire(self):
        vals = [b"", b"ab", "é".encode()]
        self.assertEqual(decode_bytes(encode_bytes(vals)), vals)


class ServerTest(unittest.TestCase):
    """The example model behind the real server, called as llmserve calls it."""

    def test_example(self):
        asyncio.run(self._example())

    async def _example(self):
        with tempfile.TemporaryDirectory() as d:
            use_settings(d, {"name": "lin", "parameters": {"extra": {"scale": 3.0, "offset": 1.0}}})
            model = LinearModel(Settings.from_env())
            sock = "unix:" + os.path.join(d, "s.sock")
            server = await serve(model, sock)
            try:
                async with grpc.aio.insecure_channel(sock) as ch:
                    ready = infer_stub(ch, "ModelReady", pb.ModelReadyRequest, pb.ModelReadyResponse)
                    self.assertFalse((await ready(pb.ModelReadyRequest(name="lin"))).ready)
                    await model.load()
                    model.ready = True
                    self.assertTrue((await ready(pb.ModelReadyRequest(name="lin"))).ready)

                    infer = infer_stub(ch)
                    x = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32)
                    req = pb.ModelInferRequest(model_name="lin", id="r1")
                    req.inputs.add(name="x", datatype="FP32", shape=[3, 2])
                    req.inputs.add(name="label", datatype="BYTES", shape=[3])
                    req.raw_input_contents.extend([x.tobytes(), encode_bytes([b"a", b"b", "é".encode()])])
                    call = infer(req, metadata=(("x-echo", "hello"),))
                    resp = await call
                    md = await call.initial_metadata()
                    self.assertEqual(md.get("x-batch-rows"), "3")
                    self.assertEqual(md.get("x-echo"), "hello")
                    self.assertEqual(resp.id, "r1")
                    outs = {o.name: (o, resp.raw_output_contents[i]) for i, o in enumerate(resp.outputs)}
                    y = np.frombuffer(outs["y"][1], dtype="<f4").reshape(3, 2)
                    np.testing.assert_array_equal(y, x * 3 + 1)
                    self.assertEqual(list(np.frombuffer(outs["rows_seen"][1], dtype="<i8")), [3, 3, 3])
                    self.assertEqual(decode_bytes(outs["label"][1]), [b"A", b"B", "É".encode()])
                    self.assertEqual(list(outs["label"][0].shape), [3, 1])

                    # typed contents work too; a bad request is INVALID_ARGUMENT.
                    req = pb.ModelInferRequest(model_name="lin")
                    t = req.inputs.add(name="x", datatype="FP32", shape=[1, 2])
                    t.contents.fp32_contents.extend([1, 1])
                    resp = await infer(req)
                    self.assertEqual(list(np.frombuffer(resp.raw_output_contents[0], dtype="<f4")), [4, 4])
                    req = pb.ModelInferRequest(model_name="lin")
                    req.inputs.add(name="z", datatype="FP32", shape=[1]).contents.fp32_contents.append(1)
                    with self.assertRaises(grpc.aio.AioRpcError) as e:
                        await infer(req)
                    self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                    self.assertIn("input x", e.exception.details())

                    metrics = text_stub(ch, "RuntimeMetrics/Metrics")
                    text = (await metrics(empty_pb2.Empty())).value
                    self.assertIn("# TYPE linear_rows counter\nlinear_rows 4.0\n", text)
                    self.assertIn('linear_batch_rows_bucket{le="4.0"} 2', text)
            finally:
                await server.stop(None)


class ParametersTest(unittest.TestCase):
    def test_attrs(self):
        p = Parameters(content_type="np", headers={"a": "b"})
        self.assertEqual(p.content_type, "np")
        self.assertIsNone(p.missing)
        self.assertEqual(p.dict()["headers"], {"a": "b"})


if __name__ == "__main__":
    unittest.main()
