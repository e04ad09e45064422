"""The runtime server: a class's load/predict/unload behind the Open
Inference Protocol's gRPC service on llmserve's Unix socket (grpc.aio,
generic handlers: no grpc-tools needed), plus llmserve's metrics service."""

import asyncio
import logging
import os
import signal
import struct
import sys
import traceback
from typing import Any, Dict, List, Optional, Tuple

import grpc
import numpy as np
from google.protobuf import empty_pb2, wrappers_pb2

from . import metrics
from . import open_inference_grpc_pb2 as pb
from .codecs import to_dtype
from .model import LLMServeModel
from .types import InferenceRequest, InferenceResponse, InvalidInput

SERVICE = "inference.GRPCInferenceService"
METRICS_SERVICE = "llmserve.runtime.v1.RuntimeMetrics"
INFO_SERVICE = "llmserve.runtime.v1.RuntimeInfo"
log = logging.getLogger("llmserve_runtime")

# Metadata keys that belong to the transport, not to the request.
_RESERVED = {"content-type", "user-agent", "te", "accept-encoding", "authorization"}


# --- protobuf <-> types -----------------------------------------------------

def params_from_pb(m) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k, p in m.items():
        which = p.WhichOneof("parameter_choice")
        if which is not None:
            out[k] = getattr(p, which)
    return out


def params_to_pb(values: Dict[str, Any], m) -> None:
    for k, v in values.items():
        if v is None or k == "headers":
            continue
        p = m[k]
        if isinstance(v, bool):
            p.bool_param = v
        elif isinstance(v, (int, np.integer)):
            if v >= 1 << 63:
                p.uint64_param = int(v)
            else:
                p.int64_param = int(v)
        elif isinstance(v, (float, np.floating)):
            p.double_param = float(v)
        else:
            p.string_param = str(v)


def decode_bytes(raw: bytes) -> List[bytes]:
    out, off = [], 0
    while off < len(raw):
        if len(raw) - off < 4:
            raise InvalidInput("BYTES data is cut inside an element's length")
        (n,) = struct.unpack_from("<I", raw, off)
        off += 4
        if n > len(raw) - off:
            raise InvalidInput("a BYTES element says it has %d bytes but %d are left" % (n, len(raw) - off))
        out.append(bytes(raw[off:off + n]))
        off += n
    return out


def encode_bytes(vals) -> bytes:
    parts = []
    for v in vals:
        b = b"" if v is None else v.encode("utf-8") if isinstance(v, str) else bytes(v)
        parts.append(struct.pack("<I", len(b)))
        parts.append(b)
    return b"".join(parts)


_TYPED = {
    "BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
    "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents", "UINT32": "uint_contents",
    "UINT64": "uint64_contents", "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents",
}


def request_from_pb(req, headers: Dict[str, str], T: Any = None) -> InferenceRequest:
    """The request as T's types (a module with InferenceRequest,
    RequestInput, RequestOutput and Parameters; default this package's:
    an MLModel's are mlserver.types)."""
    if T is None:
        from . import types as T
    raw = list(req.raw_input_contents)
    if raw and len(raw) != len(req.inputs):
        raise InvalidInput("the request has %d inputs but %d raw_input_contents" % (len(req.inputs), len(raw)))
    inputs = []
    for i, t in enumerate(req.inputs):
        if raw:
            data: Any = decode_bytes(raw[i]) if t.datatype == "BYTES" else np.frombuffer(raw[i], dtype=to_dtype(t.datatype))
        else:
            field = _TYPED.get(t.datatype)
            if field is None:
                raise InvalidInput("input %r: datatype %s must come in raw_input_contents" % (t.name, t.datatype))
            vals = list(getattr(t.contents, field))
            data = vals if t.datatype == "BYTES" else np.asarray(vals, dtype=to_dtype(t.datatype))
        inputs.append(T.RequestInput(name=t.name, shape=list(t.shape), datatype=t.datatype, data=data,
                                     parameters=T.Parameters(**params_from_pb(t.parameters))))
    params = params_from_pb(req.parameters)
    params["headers"] = headers
    outputs = [T.RequestOutput(name=o.name, parameters=T.Parameters(**params_from_pb(o.parameters))) for o in req.outputs]
    return T.InferenceRequest(inputs=inputs, id=req.id or None, parameters=T.Parameters(**params),
                              outputs=outputs or None)


def response_to_pb(resp: InferenceResponse, req_id: str) -> Tuple[Any, Dict[str, str]]:
    if not isinstance(resp, InferenceResponse):
        raise TypeError("predict returned %s, not an InferenceResponse" % type(resp).__name__)
    out = pb.ModelInferResponse(model_name=resp.model_name or "", model_version=resp.model_version or "",
                                id=resp.id or req_id or "")
    headers: Dict[str, str] = {}
    if resp.parameters is not None:
        values = resp.parameters.dict()
        headers = {str(k).lower(): str(v) for k, v in (values.get("headers") or {}).items()}
        params_to_pb(values, out.parameters)
    for o in resp.outputs:
        datatype = getattr(o.datatype, "value", o.datatype)
        t = out.outputs.add(name=o.name, datatype=datatype, shape=[int(d) for d in o.shape])
        if o.parameters is not None:
            params_to_pb({k: v for k, v in o.parameters.dict().items() if not k.startswith("_")}, t.parameters)
        data = getattr(o.data, "root", o.data)  # mlserver.types.TensorData
        if datatype == "BYTES":
            out.raw_output_contents.append(encode_bytes(_flat_elements(data)))
        else:
            arr = np.asarray(data, dtype=to_dtype(datatype))
            out.raw_output_contents.append(np.ascontiguousarray(arr).tobytes())
    return out, headers


def _flat_elements(data: Any) -> List[Any]:
    """A BYTES output's elements, row-major: from a flat or nested list, a
    NumPy array, or a single bytes or str."""
    if isinstance(data, (bytes, bytearray, str)):
        return [data]
    if isinstance(data, np.ndarray):
        return data.reshape(-1).tolist()
    out: List[Any] = []
    for v in data:
        if isinstance(v, (list, tuple, np.ndarray)):
            out.extend(_flat_elements(v))
        else:
            out.append(v)
    return out


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def stream_response_bytes(resp) -> bytes:
    """A ModelStreamInferResponse (KServe's and Triton's grpc_service.proto:
    error_message = 1, infer_response = 2) holding resp, written by hand:
    the package's generated messages are the Open Inference Protocol's
    proto, which has no streaming."""
    body = resp.SerializeToString()
    return b"\x12" + _varint(len(body)) + body


# --- the service ---------------------------------------------------------------

class RuntimeServer:
    def __init__(self, model: LLMServeModel) -> None:
        self.model = model
        # The request types predict gets: the model's (an MLModel's are
        # mlserver.types), else this package's.
        self.types = getattr(model, "_wire_types", None)

    async def server_live(self, request, context):
        return pb.ServerLiveResponse(live=True)

    async def server_ready(self, request, context):
        return pb.ServerReadyResponse(ready=True)

    async def model_ready(self, request, context):
        return pb.ModelReadyResponse(ready=self.model.ready and request.name in ("", self.model.name))

    async def server_metadata(self, request, context):
        return pb.ServerMetadataResponse(name="llmserve_runtime", version="1", extensions=[])

    async def model_metadata(self, request, context):
        s = self.model.settings
        resp = pb.ModelMetadataResponse(name=self.model.name, versions=[self.model.version], platform=s.platform or "")
        for key, target in (("inputs", resp.inputs), ("outputs", resp.outputs)):
            for t in (s.dict().get(key) or []):
                target.add(name=t.get("name", ""), datatype=t.get("datatype", ""), shape=t.get("shape", []))
        return resp

    async def model_infer(self, request, context):
        if not self.model.ready:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "model %s is not loaded yet" % self.model.name)
        headers = self._headers(context)
        try:
            req = request_from_pb(request, headers, self.types)
            resp = await self.model.predict(req)
            out, resp_headers = response_to_pb(resp, request.id)
        except Exception as e:
            await self._abort(context, "predict", e)
        if resp_headers:
            await context.send_initial_metadata(tuple(resp_headers.items()))
        return out

    @staticmethod
    def _headers(context) -> Dict[str, str]:
        headers = {}
        for k, v in context.invocation_metadata() or ():
            if k not in _RESERVED and not k.startswith("grpc-") and not k.startswith(":"):
                headers[k] = v
        return headers

    async def _abort(self, context, what: str, e: Exception) -> None:
        """Ends the call for e: INVALID_ARGUMENT for bad input (InvalidInput,
        or an MLServer error with status_code 400 or 422, such as a codec's),
        else INTERNAL with its type and message (the traceback to stderr)."""
        if isinstance(e, InvalidInput) or getattr(e, "status_code", None) in (400, 422):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)
        await context.abort(grpc.StatusCode.INTERNAL, "%s failed: %s: %s" % (what, type(e).__name__, e))

    async def model_stream_infer(self, request_iterator, context):
        """ModelStreamInfer: the requests of the stream go to the model's
        predict_stream as an async iterator (llmserve sends one, then
        closes its side); each response it yields is sent at once. The
        first response's headers go back as header metadata."""
        if not self.model.ready:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "model %s is not loaded yet" % self.model.name)
        headers = self._headers(context)
        first_id = []

        async def payloads():
            async for r in request_iterator:
                if not first_id:
                    first_id.append(r.id)
                yield request_from_pb(r, headers, self.types)

        sent_headers = False
        try:
            async for resp in self.model.predict_stream(payloads()):
                out, resp_headers = response_to_pb(resp, first_id[0] if first_id else "")
                if not sent_headers:
                    sent_headers = True
                    if resp_headers:
                        await context.send_initial_metadata(tuple(resp_headers.items()))
                yield out
        except Exception as e:
            await self._abort(context, "predict_stream", e)

    async def content_types(self, request, context):
        """The content types the runtime's registered codecs decode
        (mlserver.codecs' registry, when the model uses it), one a line."""
        codecs = sys.modules.get("mlserver.codecs.base")
        names = codecs.registered_content_types() if codecs is not None else []
        return wrappers_pb2.StringValue(value="\n".join(names))

    async def metrics(self, request, context):
        return wrappers_pb2.StringValue(value=metrics.REGISTRY.text())

    def handlers(self):
        def unary(fn, req, resp):
            return grpc.unary_unary_rpc_method_handler(fn, request_deserializer=req.FromString,
                                                       response_serializer=resp.SerializeToString)
        oip = grpc.method_handlers_generic_handler(SERVICE, {
            "ServerLive": unary(self.server_live, pb.ServerLiveRequest, pb.ServerLiveResponse),
            "ServerReady": unary(self.server_ready, pb.ServerReadyRequest, pb.ServerReadyResponse),
            "ModelReady": unary(self.model_ready, pb.ModelReadyRequest, pb.ModelReadyResponse),
            "ServerMetadata": unary(self.server_metadata, pb.ServerMetadataRequest, pb.ServerMetadataResponse),
            "ModelMetadata": unary(self.model_metadata, pb.ModelMetadataRequest, pb.ModelMetadataResponse),
            "ModelInfer": unary(self.model_infer, pb.ModelInferRequest, pb.ModelInferResponse),
            "ModelStreamInfer": grpc.stream_stream_rpc_method_handler(
                self.model_stream_infer, request_deserializer=pb.ModelInferRequest.FromString,
                response_serializer=stream_response_bytes),
        })
        mx = grpc.method_handlers_generic_handler(METRICS_SERVICE, {
            "Metrics": unary(self.metrics, empty_pb2.Empty, wrappers_pb2.StringValue),
        })
        info = grpc.method_handlers_generic_handler(INFO_SERVICE, {
            "ContentTypes": unary(self.content_types, empty_pb2.Empty, wrappers_pb2.StringValue),
        })
        return (oip, mx, info)


async def serve(model: LLMServeModel, address: str) -> None:
    """Serve model on address ("unix:/path" or "host:port") until SIGTERM or
    SIGINT: the server answers at once, ModelReady once load returned; on
    the signal it stops taking requests, lets running ones finish (5 s) and
    calls unload."""
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 1 << 30),
                                      ("grpc.max_send_message_length", 1 << 30)])
    server.add_generic_rpc_handlers(RuntimeServer(model).handlers())
    if server.add_insecure_port(address) == 0 and not address.startswith("unix:"):
        raise RuntimeError("cannot listen on %s" % address)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # llmserve stops its runtimes with SIGTERM; if it dies instead (or the
    # shell it started us with does), the parent changes: stop too, rather
    # than live on as an orphan.
    parent = os.getppid()
    llmserve = int(os.environ.get("LLMSERVE_PARENT_PID", "0") or 0)

    def orphaned() -> bool:
        if os.getppid() != parent:
            return True
        if llmserve > 0:
            try:
                os.kill(llmserve, 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                pass
        return False

    async def watch_parent() -> None:
        while not stop.is_set():
            if orphaned():
                log.warning("llmserve (the parent process) is gone; stopping")
                stop.set()
                return
            await asyncio.sleep(1)

    watcher = asyncio.ensure_future(watch_parent())
    log.info("serving model %s on %s; loading it", model.name, address)
    if await model.load() is False:  # MLServer's MLModel.load answers whether it is ready
        raise SystemExit("model %s: load() returned False: the model is not ready" % model.name)
    model.ready = True
    log.info("model %s loaded", model.name)
    await stop.wait()
    watcher.cancel()
    model.ready = False
    await server.stop(5)
    await model.unload()


def address_from_env(socket: Optional[str] = None) -> str:
    path = socket or os.environ.get("LLMSERVE_RUNTIME_SOCKET", "")
    if not path:
        raise SystemExit("no socket: llmserve passes LLMSERVE_RUNTIME_SOCKET (or give --socket PATH, or --address HOST:PORT)")
    return "unix:" + os.path.abspath(path)
