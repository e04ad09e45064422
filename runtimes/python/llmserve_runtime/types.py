"""Request and response types, shaped like MLServer's (mlserver.types).

They are plain classes (no pydantic): an InferenceRequest has id,
parameters, inputs and outputs; each RequestInput has name, shape,
datatype, parameters and data. ``data`` is flat, in row-major order: a
NumPy 1-D array for the numeric datatypes and BOOL, a list of ``bytes``
for BYTES. The codecs (codecs.py) turn inputs into NumPy arrays or
strings and back.
"""

from typing import Any, Dict, List, Optional


class Parameters:
    """Open-ended parameters, read as attributes (``parameters.content_type``,
    ``parameters.headers``) or with ``dict()``; a missing one is None."""

    def __init__(self, **kwargs: Any) -> None:
        object.__setattr__(self, "_values", dict(kwargs))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._values.get(name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._values[name] = value

    def __contains__(self, name: str) -> bool:
        return name in self._values

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Parameters) and self._values == other._values

    def __repr__(self) -> str:
        return "Parameters(%s)" % ", ".join("%s=%r" % kv for kv in self._values.items())

    def dict(self) -> Dict[str, Any]:
        return dict(self._values)


class _Tensor:
    """What a request's input and a response's output are: a named tensor
    with its shape, datatype, data and parameters."""

    def __init__(self, name: str, shape: List[int], datatype: str, data: Any = None,
                 parameters: Optional[Parameters] = None) -> None:
        self.name = name
        self.shape = list(shape)
        self.datatype = datatype
        self.data = data
        self.parameters = parameters


class RequestInput(_Tensor):
    def __repr__(self) -> str:
        return "RequestInput(name=%r, shape=%r, datatype=%r)" % (self.name, self.shape, self.datatype)


class RequestOutput:
    def __init__(self, name: str, parameters: Optional[Parameters] = None) -> None:
        self.name = name
        self.parameters = parameters


class InferenceRequest:
    def __init__(self, inputs: List[RequestInput], id: Optional[str] = None,
                 parameters: Optional[Parameters] = None,
                 outputs: Optional[List[RequestOutput]] = None) -> None:
        self.id = id
        self.inputs = inputs
        self.parameters = parameters
        self.outputs = outputs


class ResponseOutput(_Tensor):
    """One output: ``data`` is anything NumPy can turn into an array of the
    datatype (a NumPy array, a list), or for BYTES a list of bytes or str."""

    def __init__(self, name: str, shape: List[int], datatype: str, data: Any,
                 parameters: Optional[Parameters] = None) -> None:
        super().__init__(name, shape, datatype, data, parameters)


class InferenceResponse:
    """The answer. ``parameters.headers`` (a dict), if set, goes back to the
    client as response headers (HTTP) or metadata (gRPC), as in MLServer."""

    def __init__(self, model_name: str, outputs: List[ResponseOutput],
                 model_version: Optional[str] = None, id: Optional[str] = None,
                 parameters: Optional[Parameters] = None) -> None:
        self.model_name = model_name
        self.model_version = model_version
        self.id = id
        self.parameters = parameters
        self.outputs = outputs


class InvalidInput(Exception):
    """Raise it from predict for a request the model refuses: the client gets
    a 400 (INVALID_ARGUMENT) with the message. Any other exception is a 500."""
