"""What the tests that run a model behind the real server share: the
model-settings.json llmserve points the runtime at, the runtime's gRPC
server on a Unix socket, and the stubs of its methods. The test modules
import it after they put the package on sys.path."""

import json
import os
from typing import Any, Dict

import grpc
from google.protobuf import empty_pb2, wrappers_pb2

from llmserve_runtime import open_inference_grpc_pb2 as pb
from llmserve_runtime.server import RuntimeServer


def use_settings(folder: str, settings: Dict[str, Any]) -> str:
    """Writes settings as folder's model-settings.json and points
    LLMSERVE_MODEL_SETTINGS at it, as llmserve does; returns its path."""
    path = os.path.join(folder, "model-settings.json")
    with open(path, "w") as f:
        json.dump(settings, f)
    os.environ["LLMSERVE_MODEL_SETTINGS"] = path
    return path


async def serve(model: Any, sock: str) -> grpc.aio.Server:
    """Starts the runtime's services for model on sock ("unix:PATH")."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(RuntimeServer(model).handlers())
    server.add_insecure_port(sock)
    await server.start()
    return server


def infer_stub(ch: grpc.aio.Channel, method: str = "ModelInfer", request: Any = pb.ModelInferRequest,
               response: Any = pb.ModelInferResponse) -> Any:
    """The unary method of the Open Inference Protocol's service."""
    return ch.unary_unary("/inference.GRPCInferenceService/" + method,
                          request_serializer=request.SerializeToString,
                          response_deserializer=response.FromString)


def text_stub(ch: grpc.aio.Channel, path: str) -> Any:
    """A method of llmserve's runtime services that takes Empty and answers
    text (RuntimeInfo/ContentTypes, RuntimeMetrics/Metrics)."""
    return ch.unary_unary("/llmserve.runtime.v1." + path,
                          request_serializer=empty_pb2.Empty.SerializeToString,
                          response_deserializer=wrappers_pb2.StringValue.FromString)
