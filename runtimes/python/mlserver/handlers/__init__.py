"""mlserver.handlers: custom_handler is accepted so that runtimes that
declare custom endpoints import unchanged; llmserve does not serve those
endpoints (its routes are the protocols'), so the method is only an
ordinary method of the model."""

from typing import Callable, Optional


def custom_handler(rest_path: str, rest_method: str = "POST", grpc_method: Optional[str] = None) -> Callable:
    def mark(fn: Callable) -> Callable:
        fn.__custom_handler__ = {"rest_path": rest_path, "rest_method": rest_method, "grpc_method": grpc_method}
        return fn
    return mark


__all__ = ["custom_handler"]
