"""Tests of the mlserver import surface: MLServer's own codec test cases
(tests/codecs in SeldonIO/MLServer, ported to unittest: the same inputs
and expected values), and the MLServer-style example runtimes
(examples/mlserver_model/models.py, unchanged) behind the real server.
Run: /usr/bin/python3 -m unittest discover -s runtimes/python/tests"""

import asyncio
import os
import sys
import tempfile
import unittest
from datetime import datetime
from typing import List

import grpc
import numpy as np
import pandas as pd
from google.protobuf import empty_pb2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples", "mlserver_model"))

import mlserver  # noqa: E402
from mlserver.codecs import (Base64Codec, DatetimeCodec, NumpyCodec, NumpyRequestCodec, PandasCodec,  # noqa: E402
                             StringCodec, StringRequestCodec, decode_args)
from mlserver.codecs.errors import CodecError  # noqa: E402
from mlserver.codecs.numpy import to_datatype  # noqa: E402
from mlserver.codecs.pandas import _to_response_output  # noqa: E402
from mlserver.settings import ModelSettings  # noqa: E402
from mlserver.types import (Datatype, InferenceRequest, InferenceResponse, Parameters, RequestInput,  # noqa: E402
                            ResponseOutput)
from llmserve_runtime import metrics  # noqa: E402
from llmserve_runtime import open_inference_grpc_pb2 as pb  # noqa: E402
from llmserve_runtime.server import decode_bytes, encode_bytes  # noqa: E402
import models  # noqa: E402  (the example runtimes)
from served import infer_stub, serve, text_stub, use_settings  # noqa: E402


def P(ct):
    return Parameters(content_type=ct)


class NumpyCodecCases(unittest.TestCase):
    def test_can_encode(self):
        for payload, want in ((np.array([1, 2, 3]), True), (np.array(["foo", "bar"]), True), ([1, 2, 3], False)):
            self.assertEqual(NumpyCodec.can_encode(payload), want)

    def test_encode_output(self):
        cases = [
            (np.array([1, 2, 3]), ResponseOutput(name="foo", shape=[3, 1], data=[1, 2, 3], datatype="INT64", parameters=P("np"))),
            (np.array([[1, 2], [3, 4]]), ResponseOutput(name="foo", shape=[2, 2], data=[1, 2, 3, 4], datatype="INT64", parameters=P("np"))),
            (np.array([[1, 2], [3, 4]], dtype=np.int32), ResponseOutput(name="foo", shape=[2, 2], data=[1, 2, 3, 4], datatype="INT32", parameters=P("np"))),
            (np.array([1.0, 2.0]), ResponseOutput(name="foo", shape=[2, 1], data=[1, 2], datatype="FP64", parameters=P("np"))),
            (np.array([[b"\x01"], [b"\x02"]], dtype=bytes), ResponseOutput(name="foo", shape=[2, 1], data=[b"\x01\x02"], datatype="BYTES", parameters=P("np"))),
            (np.array(["foo", "bar"], dtype=str), ResponseOutput(name="foo", shape=[2, 1], data=[b"foo", b"bar"], datatype="BYTES", parameters=P("np"))),
            (np.array([None, "bar"]), ResponseOutput(name="foo", shape=[2, 1], data=[None, "bar"], datatype="BYTES", parameters=P("np"))),
            (np.array([2.3, 3.4, np.nan]), ResponseOutput(name="foo", shape=[3, 1], data=[2.3, 3.4, None], datatype="FP64", parameters=P("np"))),
        ]
        for payload, want in cases:
            with self.subTest(payload=payload):
                self.assertEqual(NumpyCodec.encode_output(name="foo", payload=payload), want)

    def test_decode_input(self):
        cases = [
            (RequestInput(name="foo", shape=[3], data=[1, 2, 3], datatype="INT32"), np.array([1, 2, 3])),
            (RequestInput(name="foo", shape=[2, 2], data=[1, 2, 3, 4], datatype="INT32"), np.array([[1, 2], [3, 4]])),
            (RequestInput(name="foo", shape=[2], data=[1, 2], datatype="FP32"), np.array([1.0, 2.0])),
            (RequestInput(name="foo", shape=[2, 1], data=[b"\x01", b"\x02"], datatype="BYTES"), np.array([[b"\x01"], [b"\x02"]], dtype=bytes)),
            (RequestInput(name="foo", shape=[2], data=["foo", "bar"], datatype="BYTES"), np.array(["foo", "bar"], dtype=str)),
            (RequestInput(name="foo", shape=[3], data=[1, 2, None], datatype="FP16"), np.array([1, 2, np.nan], dtype="float16")),
        ]
        for inp, want in cases:
            with self.subTest(inp=inp):
                np.testing.assert_array_equal(NumpyCodec.decode_input(inp), want)

    def test_codec_idempotent(self):
        for inp in (RequestInput(name="foo", shape=[3], data=[1, 2, 3], datatype="INT32"),
                    RequestInput(name="foo", shape=[2, 2], data=[1, 2, 3, 4], datatype="INT32"),
                    RequestInput(name="foo", shape=[2], data=[1, 2], datatype="FP32"),
                    RequestInput(name="foo", shape=[2, 1], data=[b"\x01\x02"], datatype="BYTES"),
                    RequestInput(name="foo", shape=[2], data=["foo", "bar"], datatype="BYTES")):
            with self.subTest(inp=inp):
                decoded = NumpyCodec.decode_input(inp)
                out = NumpyCodec.encode_output(name="foo", payload=decoded)
                again = NumpyCodec.encode_input(name="foo", payload=decoded)
                self.assertEqual(out.datatype, again.datatype)
                self.assertEqual(out.shape, again.shape)
                self.assertEqual(out.data, again.data)

    def test_to_datatype(self):
        for dtype, want in ((np.bool_, "BOOL"), (np.uint8, "UINT8"), (np.uint16, "UINT16"), (np.uint32, "UINT32"),
                            (np.uint64, "UINT64"), (np.int8, "INT8"), (np.int16, "INT16"), (np.int32, "INT32"),
                            (np.int64, "INT64"), (np.float16, "FP16"), (np.float32, "FP32"), (np.float64, "FP64"),
                            (np.byte, "INT8"), (bytes, "BYTES"), (str, "BYTES")):
            self.assertEqual(to_datatype(np.dtype(dtype)), Datatype(want))

    def test_request_codec(self):
        req = NumpyRequestCodec.encode_request(np.array([[1, 2]]))
        self.assertEqual(req.parameters.content_type, "np")
        self.assertEqual(req.inputs[0].name, "input-1")
        np.testing.assert_array_equal(NumpyRequestCodec.decode_request(req), np.array([[1, 2]]))
        with self.assertRaises(CodecError):
            NumpyRequestCodec.decode_request(InferenceRequest(inputs=[req.inputs[0], req.inputs[0]]))


class StringCodecCases(unittest.TestCase):
    def test_can_encode(self):
        for payload, want in ((["foo", "foo2"], True), (["foo", b"foo2"], False), ("foo", False), (b"foo", False)):
            self.assertEqual(StringCodec.can_encode(payload), want)

    def test_decode_input(self):
        cases = [
            (RequestInput(name="foo", datatype="BYTES", shape=[1, 1], data=b"hello world"), ["hello world"]),
            (RequestInput(name="foo", datatype="BYTES", shape=[1, 1], data="hello world"), ["hello world"]),
            (RequestInput(name="foo", datatype="BYTES", shape=[1, 1], data=["hello world"]), ["hello world"]),
            (RequestInput(name="foo", datatype="BYTES", shape=[1, 1], data=[b"hello world"]), ["hello world"]),
            (RequestInput(name="foo", datatype="BYTES", shape=[2, 1], data=["hello world", "hello world"]), ["hello world", "hello world"]),
            (RequestInput(name="foo", datatype="BYTES", shape=[2, 1], data=[b"hey", b"whats"]), ["hey", "whats"]),
            (RequestInput(name="foo", datatype="BYTES", shape=[1, 1], data=[None]), [None]),
        ]
        for inp, want in cases:
            self.assertEqual(StringCodec.decode_input(inp), want)

    def test_encode_output(self):
        cases = [
            (["hello world"], True, ResponseOutput(name="foo", shape=[1, 1], datatype="BYTES", data=[b"hello world"], parameters=P("str"))),
            (["hey", "whats"], True, ResponseOutput(name="foo", shape=[2, 1], datatype="BYTES", data=[b"hey", b"whats"], parameters=P("str"))),
            (["hey", "whats"], False, ResponseOutput(name="foo", shape=[2, 1], datatype="BYTES", data=["hey", "whats"], parameters=P("str"))),
        ]
        for decoded, use_bytes, want in cases:
            self.assertEqual(StringCodec.encode_output(name="foo", payload=decoded, use_bytes=use_bytes), want)
            inp = StringCodec.encode_input(name="foo", payload=decoded, use_bytes=use_bytes)
            self.assertEqual((inp.datatype, inp.shape, inp.data, inp.parameters.content_type),
                             (want.datatype, want.shape, want.data, "str"))

    def test_request_codec(self):
        req = StringRequestCodec.encode_request(["a", "b"])
        self.assertEqual(StringRequestCodec.decode_request(req), ["a", "b"])


class Base64CodecCases(unittest.TestCase):
    def test_can_encode(self):
        for payload, want in (([b"Python is fun", b"foo"], True), ([b"Python is fun", "foo"], False),
                              (b"Python is fun", False), ("foo", False)):
            self.assertEqual(Base64Codec.can_encode(payload), want)

    def test_encode_output(self):
        b64 = b"UHl0aG9uIGlzIGZ1bg=="
        cases = [
            ([b"Python is fun"], True, ResponseOutput(name="foo", shape=[1, 1], datatype="BYTES", data=[b64], parameters=P("base64"))),
            (["Python is fun"], True, ResponseOutput(name="foo", shape=[1, 1], datatype="BYTES", data=[b64], parameters=P("base64"))),
            ([b"Python is fun", b"Python is fun"], True, ResponseOutput(name="foo", shape=[2, 1], datatype="BYTES", data=[b64, b64], parameters=P("base64"))),
            ([b"Python is fun", b"Python is fun"], False, ResponseOutput(name="foo", shape=[2, 1], datatype="BYTES", data=[b64.decode(), b64.decode()], parameters=P("base64"))),
        ]
        for decoded, use_bytes, want in cases:
            self.assertEqual(Base64Codec.encode_output(name="foo", payload=decoded, use_bytes=use_bytes), want)

    def test_decode_output(self):
        cases = [
            (ResponseOutput(name="foo", shape=[1, 1], datatype="BYTES", data="UHl0aG9uIGlzIGZ1bg=="), [b"Python is fun"]),
            (ResponseOutput(name="foo", shape=[1, 1], datatype="BYTES", data=b"Python is fun"), [b"Python is fun"]),
            (ResponseOutput(name="foo", shape=[1, 1], datatype="BYTES", data="Python is fun"), [b"Python is fun"]),
            (ResponseOutput(name="foo", shape=[2, 1], datatype="BYTES", data=[b"UHl0aG9uIGlzIGZ1bg==", b"UHl0aG9uIGlzIGZ1bg=="]), [b"Python is fun", b"Python is fun"]),
        ]
        for enc, want in cases:
            self.assertEqual(Base64Codec.decode_output(enc), want)
            self.assertEqual(Base64Codec.decode_input(RequestInput(name="foo", shape=enc.shape, datatype="BYTES", data=enc.data)), want)


class DatetimeCodecCases(unittest.TestCase):
    iso, iso_b = "2021-08-24T15:01:19", b"2021-08-24T15:01:19"
    tz_iso, tz_iso_b = "2021-08-24T15:01:19-04:00", b"2021-08-24T15:01:19-04:00"

    def test_can_encode(self):
        dt, tz = datetime.fromisoformat(self.iso), datetime.fromisoformat(self.tz_iso)
        self.assertTrue(DatetimeCodec.can_encode([dt, tz]))
        self.assertFalse(DatetimeCodec.can_encode([dt, self.iso]))
        self.assertFalse(DatetimeCodec.can_encode(dt))

    def test_encode_output(self):
        dt, tz = datetime.fromisoformat(self.iso), datetime.fromisoformat(self.tz_iso)
        cases = [
            ([dt], ResponseOutput(name="foo", shape=[1, 1], datatype="BYTES", data=[self.iso_b], parameters=P("datetime"))),
            ([dt, dt], ResponseOutput(name="foo", shape=[2, 1], datatype="BYTES", data=[self.iso_b, self.iso_b], parameters=P("datetime"))),
            ([self.iso], ResponseOutput(name="foo", shape=[1, 1], datatype="BYTES", data=[self.iso_b], parameters=P("datetime"))),
            ([tz], ResponseOutput(name="foo", shape=[1, 1], datatype="BYTES", data=[self.tz_iso_b], parameters=P("datetime"))),
        ]
        for decoded, want in cases:
            self.assertEqual(DatetimeCodec.encode_output(name="foo", payload=decoded), want)

    def test_decode_input(self):
        dt, tz = datetime.fromisoformat(self.iso), datetime.fromisoformat(self.tz_iso)
        cases = [
            (RequestInput(name="foo", shape=[1], datatype="BYTES", data=self.iso_b), [dt]),
            (RequestInput(name="foo", shape=[1], datatype="BYTES", data=[self.iso]), [dt]),
            (RequestInput(name="foo", shape=[2], datatype="BYTES", data=[self.iso_b, self.iso_b]), [dt, dt]),
            (RequestInput(name="foo", shape=[2], datatype="BYTES", data=[self.iso, self.iso]), [dt, dt]),
            (RequestInput(name="foo", shape=[1], datatype="BYTES", data=[self.tz_iso]), [tz]),
        ]
        for enc, want in cases:
            self.assertEqual(DatetimeCodec.decode_input(enc), want)


class PandasCodecCases(unittest.TestCase):
    def test_can_encode(self):
        self.assertTrue(PandasCodec.can_encode(pd.DataFrame({"a": [1, 2, 3], "b": ["A", "B", "C"]})))
        self.assertFalse(PandasCodec.can_encode({"a": [1, 2, 3]}))

    def test_to_response_output(self):
        cases = [
            (pd.Series(data=["hey", "abc"], name="foo"), ResponseOutput(name="foo", shape=[2, 1], data=[b"hey", b"abc"], datatype="BYTES", parameters=P("str"))),
            (pd.Series(data=[1, 2, 3], name="bar"), ResponseOutput(name="bar", shape=[3, 1], data=[1, 2, 3], datatype="INT64")),
            (pd.Series(data=[1, 2.5, 3], name="bar"), ResponseOutput(name="bar", shape=[3, 1], data=[1.0, 2.5, 3.0], datatype="FP64")),
            (pd.Series(data=[[1, 2, 3], [4, 5, 6]], name="bar"), ResponseOutput(name="bar", shape=[2, 1], data=[b"[1, 2, 3]", b"[4, 5, 6]"], datatype="BYTES", parameters=P("pd_json"))),
        ]
        for series, want in cases:
            self.assertEqual(_to_response_output(series), want)

    def test_encode_response(self):
        df = pd.DataFrame({"a": [1, 2, 3], "b": ["A", "B", "C"]})
        want = InferenceResponse(model_name="my-model", parameters=P("pd"), outputs=[
            ResponseOutput(name="a", shape=[3, 1], datatype="INT64", data=[1, 2, 3]),
            ResponseOutput(name="b", shape=[3, 1], datatype="BYTES", data=[b"A", b"B", b"C"], parameters=P("str")),
        ])
        self.assertEqual(PandasCodec.encode_response("my-model", df), want)
        req = PandasCodec.encode_request(df)
        self.assertEqual(req.parameters.content_type, "pd")
        self.assertEqual([i.name for i in req.inputs], ["a", "b"])

    def test_decode_response(self):
        resp = InferenceResponse(model_name="my-model", outputs=[
            ResponseOutput(name="a", shape=[3], datatype="INT64", data=[1, 2, 3]),
            ResponseOutput(name="b", shape=[3], datatype="BYTES", data=[b"A", b"B", b"C"]),
        ])
        pd.testing.assert_frame_equal(PandasCodec.decode_response(resp), pd.DataFrame({"a": [1, 2, 3], "b": [b"A", b"B", b"C"]}))
        resp.outputs[1].parameters = Parameters(_decoded_payload=["A", "B", "C"])
        pd.testing.assert_frame_equal(PandasCodec.decode_response(resp), pd.DataFrame({"a": [1, 2, 3], "b": ["A", "B", "C"]}))

    def test_decode_request(self):
        req = InferenceRequest(inputs=[
            RequestInput(name="a", data=[1], datatype="INT32", shape=[1], parameters=Parameters(_decoded_payload=np.array([1]))),
        ])
        pd.testing.assert_frame_equal(PandasCodec.decode_request(req), pd.DataFrame({"a": np.array([1], dtype=np.int32)}), check_dtype=False)
        req = InferenceRequest(inputs=[RequestInput(name="a", data=[1, 2, 3], datatype="FP32", shape=[3, 1])])
        pd.testing.assert_frame_equal(PandasCodec.decode_request(req), pd.DataFrame({"a": np.array([1, 2, 3], dtype=np.float32)}))


class DecodeArgsCases(unittest.TestCase):
    """MLServer's SimpleModel fixture: @decode_args with np.ndarray and
    List[str] arguments."""

    def test_simple_model(self):
        class SimpleModel(mlserver.MLModel):
            @decode_args
            async def predict(self, foo: np.ndarray, bar: List[str]) -> np.ndarray:
                return foo.sum(axis=1, keepdims=True)

        model = SimpleModel(ModelSettings(name="simple", parameters={"version": "v1"}))
        req = InferenceRequest(inputs=[
            RequestInput(name="foo", datatype="INT32", shape=[1, 2], data=[1, 2]),
            RequestInput(name="bar", datatype="BYTES", shape=[1, 2], data=["asd", "qwe"]),
        ])
        resp = asyncio.run(model.predict(req))
        self.assertEqual((resp.model_name, resp.model_version), ("simple", "v1"))
        self.assertEqual(resp.outputs[0].name, "output-0")
        np.testing.assert_array_equal(NumpyCodec.decode_output(resp.outputs[0]), np.array([[3]]))
        bad = InferenceRequest(inputs=[RequestInput(name="foo", datatype="INT32", shape=[1, 2], data=[1, 2]),
                                       RequestInput(name="wrong", datatype="BYTES", shape=[1], data=["x"])])
        with self.assertRaises(CodecError):
            asyncio.run(model.predict(bad))


class MLModelCases(unittest.TestCase):
    def test_settings_and_decode(self):
        s = ModelSettings(**{"name": "m", "implementation": "models.SumModel",
                             "inputs": [{"name": "x", "datatype": "BYTES", "shape": [-1], "parameters": {"content_type": "str"}}],
                             "parameters": {"version": "v2", "extra": {"k": 1}, "load_error": True}})
        model = models.TextModel(s)
        self.assertEqual((model.name, model.version, model._settings.parameters.extra), ("m", "v2", {"k": 1}))
        self.assertIsInstance(model.settings.parameters.extra, dict)
        self.assertTrue(getattr(model.settings.parameters, "load_error", False))
        self.assertFalse(getattr(model.settings.parameters, "nope", False))
        self.assertEqual(model.settings.implementation, "models.SumModel")
        # The content type comes from the model's metadata when the input has none.
        self.assertEqual(model.decode(RequestInput(name="x", datatype="BYTES", shape=[1], data=[b"hi"])), ["hi"])
        # A codec the runtime registered.
        inp = RequestInput(name="y", datatype="BYTES", shape=[1], data=[b"hi"], parameters=P("shout"))
        self.assertEqual(model.decode(inp), ["HI"])
        self.assertIn("shout", mlserver.codecs.registered_content_types())

    def test_init_with_settings(self):
        # A runtime whose __init__ takes the settings, as MLServer passes them.
        class WithInit(mlserver.MLModel):
            def __init__(self, settings: ModelSettings):
                super().__init__(settings)
                self.seen = settings.name

        with tempfile.TemporaryDirectory() as d:
            use_settings(d, {"name": "with-init", "implementation": "x.WithInit"})
            os.environ["LLMSERVE_MODEL_VERSION"] = "7"
            try:
                from llmserve_runtime.__main__ import instantiate
                model = instantiate(WithInit)
            finally:
                del os.environ["LLMSERVE_MODEL_VERSION"]
        self.assertEqual((model.seen, model.name, model.version), ("with-init", "with-init", "7"))

    def test_metrics_registered_on_the_fly(self):
        mlserver.log(never_registered_total=3)
        self.assertIn("# TYPE never_registered_total histogram", metrics.REGISTRY.text())


def _stream_response(raw: bytes) -> pb.ModelInferResponse:
    assert raw[0] == 0x12, raw[:1]
    n, shift, i = 0, 0, 1
    while True:
        b = raw[i]
        n |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            break
        shift += 7
    return pb.ModelInferResponse.FromString(raw[i:i + n])


class ServedCases(unittest.TestCase):
    """The example runtimes behind the real server, called as llmserve calls them."""

    def test_served(self):
        asyncio.run(self._served())

    async def _served(self):
        with tempfile.TemporaryDirectory() as d:
            use_settings(d, {"name": "sum-model", "implementation": "models.SumModel",
                             "parameters": {"version": "v1.2.3", "extra": {"scale": 2.0}}})
            os.environ.pop("LLMSERVE_MODEL_NAME", None)
            os.environ.pop("LLMSERVE_MODEL_VERSION", None)
            sum_model, text_model = models.SumModel(), models.TextModel()
            self.assertEqual(sum_model.version, "v1.2.3")
            servers = []
            socks = []
            for i, model in enumerate((sum_model, text_model)):
                self.assertTrue(await model.load())
                model.ready = True
                socks.append("unix:" + os.path.join(d, "s%d.sock" % i))
                servers.append(await serve(model, socks[-1]))
            try:
                async with grpc.aio.insecure_channel(socks[0]) as ch:
                    infer = infer_stub(ch)
                    req = pb.ModelInferRequest(model_name="sum-model", id="r1")
                    req.inputs.add(name="x", datatype="FP32", shape=[2, 3])
                    req.raw_input_contents.append(np.arange(6, dtype="<f4").tobytes())
                    call = infer(req, metadata=(("x-tenant", "a"), ("other", "b")))
                    resp = await call
                    md = await call.initial_metadata()
                    self.assertEqual(md.get("x-tenant"), "a")
                    self.assertIsNone(md.get("other"))
                    self.assertEqual((resp.id, resp.outputs[0].name, list(resp.outputs[0].shape)), ("r1", "total", [2, 1]))
                    np.testing.assert_array_equal(np.frombuffer(resp.raw_output_contents[0], "<f4"), [6.0, 24.0])
                    info = text_stub(ch, "RuntimeInfo/ContentTypes")
                    self.assertIn("shout", (await info(empty_pb2.Empty())).value.split("\n"))
                    mx = text_stub(ch, "RuntimeMetrics/Metrics")
                    self.assertIn("sum_rows_count 1", (await mx(empty_pb2.Empty())).value)
                async with grpc.aio.insecure_channel(socks[1]) as ch:
                    stream = ch.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer",
                                              request_serializer=pb.ModelInferRequest.SerializeToString,
                                              response_deserializer=_stream_response)
                    req = pb.ModelInferRequest(model_name="text-model", id="s1")
                    req.inputs.add(name="text", datatype="BYTES", shape=[1])
                    req.raw_input_contents.append(encode_bytes([b"hello streaming world"]))
                    words = []
                    async for out in stream(iter([req])):
                        self.assertEqual(out.id, "s1")
                        words.append(decode_bytes(out.raw_output_contents[0])[0].decode())
                    self.assertEqual(words, ["hello", " streaming", " world"])
                    # A codec error is bad input: INVALID_ARGUMENT.
                    infer = infer_stub(ch)
                    req = pb.ModelInferRequest(model_name="text-model")
                    t = req.inputs.add(name="text", datatype="BYTES", shape=[1])
                    t.parameters["content_type"].string_param = "shout"
                    req.raw_input_contents.append(encode_bytes([b"hi"]))
                    resp = await infer(req)
                    self.assertEqual(decode_bytes(resp.raw_output_contents[0]), [b"HI"])
            finally:
                for s in servers:
                    await s.stop(None)


if __name__ == "__main__":
    unittest.main()
