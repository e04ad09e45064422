"""PandasCodec ("pd"): a request (response) as a pandas DataFrame, each
input (output) a column. Needs Debian's python3-pandas; mlserver.codecs
imports it only when PandasCodec is asked for."""

import json
from typing import Any, List, Optional

import numpy as np
import pandas as pd

from ..types import Datatype, InferenceRequest, InferenceResponse, Parameters, RequestInput, ResponseOutput, TensorData
from .base import RequestCodec, register_request_codec
from .numpy import to_datatype, to_dtype
from .string import StringCodec, encode_str
from .utils import InputOrOutput, as_list, get_decoded_or_raw, has_decoded, inject_batch_dimension

JsonContentType = "pd_json"


def _column(values: Any) -> Any:
    """A column from an array: rows of one value each are those values;
    rows of several stay arrays (one per row)."""
    arr = np.asarray(values)
    if arr.ndim <= 1:
        return arr
    if int(np.prod(arr.shape[1:])) == 1:
        return arr.reshape(arr.shape[0])
    return list(arr)


def _to_series(input_or_output: InputOrOutput) -> pd.Series:
    params = input_or_output.parameters
    if params is not None and params.content_type == JsonContentType:
        return pd.Series([json.loads(v) for v in as_list(input_or_output.data)])
    if has_decoded(input_or_output):
        payload = get_decoded_or_raw(input_or_output)
        if isinstance(payload, np.ndarray):
            return pd.Series(_column(payload))
        return pd.Series(payload)
    if str(input_or_output.datatype) == "BYTES":
        return pd.Series(list(as_list(input_or_output.data)))  # bytes stay bytes, as MLServer
    data = input_or_output.data.root if isinstance(input_or_output.data, TensorData) else input_or_output.data
    arr = np.asarray(data, dtype=to_dtype(input_or_output)).reshape(input_or_output.shape)
    return pd.Series(_column(arr))


def _nan_to_none(v: Any) -> Any:
    return None if isinstance(v, float) and np.isnan(v) else v


def _to_response_output(series: pd.Series, use_bytes: bool = True) -> ResponseOutput:
    datatype = to_datatype(series.dtype)
    data = series.tolist()
    content_type: Optional[str] = None
    if datatype == Datatype.BYTES:
        if all(isinstance(v, (str, bytes)) for v in data):
            data = [encode_str(v) if use_bytes and isinstance(v, str) else v for v in data]
            content_type = StringCodec.ContentType
        else:
            data = [json.dumps(_nan_to_none(v) if not isinstance(v, np.ndarray) else v.tolist()) for v in data]
            data = [encode_str(v) if use_bytes else v for v in data]
            content_type = JsonContentType
    elif series.isnull().any():
        data = [_nan_to_none(v) for v in data]
    return ResponseOutput(name=str(series.name), shape=inject_batch_dimension(list(series.shape)), data=data,
                          datatype=datatype,
                          parameters=Parameters(content_type=content_type) if content_type else None)


@register_request_codec
class PandasCodec(RequestCodec):
    ContentType = "pd"
    JsonContentType = JsonContentType
    TypeHint = pd.DataFrame

    @classmethod
    def can_encode(cls, payload: Any) -> bool:
        return isinstance(payload, pd.DataFrame)

    @classmethod
    def encode_outputs(cls, payload: pd.DataFrame, use_bytes: bool = True) -> List[ResponseOutput]:
        return [_to_response_output(payload[col], use_bytes=use_bytes) for col in payload]

    @classmethod
    def encode_response(cls, model_name: str, payload: pd.DataFrame, model_version: Optional[str] = None,
                        use_bytes: bool = True, **kwargs: Any) -> InferenceResponse:
        return InferenceResponse(model_name=model_name, model_version=model_version,
                                 parameters=Parameters(content_type=cls.ContentType),
                                 outputs=cls.encode_outputs(payload, use_bytes=use_bytes))

    @classmethod
    def decode_response(cls, response: InferenceResponse) -> pd.DataFrame:
        return pd.DataFrame({o.name: _to_series(o) for o in response.outputs})

    @classmethod
    def encode_request(cls, payload: pd.DataFrame, use_bytes: bool = True, **kwargs: Any) -> InferenceRequest:
        outs = cls.encode_outputs(payload, use_bytes=use_bytes)
        return InferenceRequest(parameters=Parameters(content_type=cls.ContentType), inputs=[
            RequestInput(name=o.name, datatype=o.datatype, shape=o.shape, data=o.data, parameters=o.parameters)
            for o in outs])

    @classmethod
    def decode_request(cls, request: InferenceRequest) -> pd.DataFrame:
        return pd.DataFrame({i.name: _to_series(i) for i in request.inputs})
