"""decode_args: a predict written with typed arguments, as MLServer's.

    @decode_args
    async def predict(self, foo: np.ndarray, bar: List[str]) -> np.ndarray:

Each argument is the request's input of that name, decoded by the codec
of its type hint (np.ndarray: NumpyCodec, List[str]: StringCodec, ...);
inputs that no argument names go, as one request, to the argument whose
hint is a request codec's (pd.DataFrame). The return value (or each
element of a Tuple return) is encoded by its hint's codec as output-0,
output-1, ...
"""

import functools
import inspect
from typing import Any, Callable, Dict, List, Optional, Tuple, Union, get_args, get_origin, get_type_hints

from ..types import InferenceRequest, InferenceResponse, ResponseOutput
from .base import InputCodec, RequestCodec, find_input_codec, find_request_codec
from .errors import CodecNotFound, InputNotFound, InputsNotFound, OutputNotFound


def _unwrap_optional(hint: Any) -> Any:
    if get_origin(hint) is Union:
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _is(codec: Any, kind: type) -> bool:
    return (isinstance(codec, type) and issubclass(codec, kind)) or isinstance(codec, kind)


def _codec_for(name: Optional[str], hint: Any, is_input: bool) -> Any:
    if hint is type(None) or hint is None:
        return None
    if hint == "pd.DataFrame" or getattr(hint, "__name__", "") == "DataFrame":
        from . import pandas  # noqa: F401  (registers PandasCodec)
    codec = find_input_codec(type_hint=hint) or find_request_codec(type_hint=hint)
    if codec is None:
        raise CodecNotFound(name=name, payload_type=str(hint), is_input=is_input)
    return codec


class _Signature:
    def __init__(self, fn: Callable) -> None:
        hints = {k: _unwrap_optional(v) for k, v in get_type_hints(fn).items()}
        ret = hints.pop("return", None)
        if get_origin(ret) in (tuple, Tuple):
            self.output_hints: List[Any] = list(get_args(ret))
            self.multiple = True
        else:
            self.output_hints = [] if ret is None else [ret]
            self.multiple = False
        params = list(inspect.signature(fn).parameters.values())[1:]  # after self
        self.required = [p.name for p in params if p.default is inspect.Parameter.empty
                         and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        self.inputs: Dict[str, Any] = {n: _codec_for(n, h, True) for n, h in hints.items()}
        self.outputs = [_codec_for(None, h, False) for h in self.output_hints]

    def decode(self, request: InferenceRequest) -> Dict[str, Any]:
        args: Dict[str, Any] = {}
        extra = []
        for inp in request.inputs:
            codec = self.inputs.get(inp.name)
            if codec is None or not _is(codec, InputCodec):
                extra.append(inp)
                continue
            args[inp.name] = codec.decode_input(inp)
        if extra:
            target = next(((n, c) for n, c in self.inputs.items() if _is(c, RequestCodec)), None)
            if target is None:
                raise InputsNotFound(extra, self.inputs)
            args[target[0]] = target[1].decode_request(InferenceRequest(inputs=extra, parameters=request.parameters))
        for name in self.required:
            if name not in args:
                raise InputNotFound(name)
        return args

    def encode(self, model_name: str, model_version: Optional[str], result: Any) -> InferenceResponse:
        payloads = list(result) if self.multiple else [result]
        outputs: List[ResponseOutput] = []
        for idx, payload in enumerate(payloads):
            if idx >= len(self.outputs) or not self.outputs[idx].can_encode(payload):
                raise OutputNotFound(idx, type(payload), self.output_hints)
            codec = self.outputs[idx]
            if _is(codec, InputCodec):
                outputs.append(codec.encode_output(name="output-%d" % idx, payload=payload))
            else:
                outputs.extend(codec.encode_response(model_name="", payload=payload).outputs)
        return InferenceResponse(model_name=model_name, model_version=model_version, outputs=outputs)


def decode_args(predict: Callable) -> Callable:
    sig = _Signature(predict)

    @functools.wraps(predict)
    async def wrapped(self: Any, request: InferenceRequest) -> InferenceResponse:
        result = await predict(self, **sig.decode(request))
        return sig.encode(self.name, self.version, result)

    return wrapped
