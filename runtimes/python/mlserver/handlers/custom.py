from . import custom_handler

__all__ = ["custom_handler"]
