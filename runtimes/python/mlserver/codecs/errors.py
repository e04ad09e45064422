"""Codec errors: bad input for the request (400 / INVALID_ARGUMENT)."""

from typing import Any, Dict, List, Optional

from ..errors import MLServerError


class CodecError(MLServerError):
    def __init__(self, msg: str) -> None:
        super().__init__(msg, status_code=400)


class CodecNotFound(CodecError):
    def __init__(self, name: Optional[str] = None, payload_type: Optional[str] = None,
                 is_input: bool = False, is_request: bool = False) -> None:
        what = ("request" if is_request else "input") if is_input else ("response" if is_request else "output")
        msg = "no codec found for %s" % what
        if name:
            msg += " %r" % name
        if payload_type:
            msg += " of type %s" % payload_type
        super().__init__(msg)


class InputNotFound(CodecError):
    def __init__(self, name: str) -> None:
        super().__init__("input %r not found in the request" % name)


class InputsNotFound(CodecError):
    def __init__(self, inputs: List[Any], codecs: Dict[str, Any]) -> None:
        names = ", ".join(repr(i.name) for i in inputs)
        super().__init__("inputs %s are not arguments of the function (it takes %s)" % (names, ", ".join(codecs) or "none"))


class OutputNotFound(CodecError):
    def __init__(self, idx: int, output_type: Any, hints: List[Any]) -> None:
        super().__init__("output %d (%s) does not match the function's return hints %s" % (idx, output_type, hints))


__all__ = ["CodecError", "CodecNotFound", "InputNotFound", "InputsNotFound", "OutputNotFound"]
