"""Exceptions: one class per td_status, each carrying the library's message (td_last_error) and the status."""

__all__ = ["Error", "InvalidArgumentError", "FileError", "FormatError", "UnsupportedError", "OutOfMemoryError",
           "RangeError", "StateError", "NonFiniteError", "DeviceError"]


class Error(Exception):
    """A failing call of libtypedecide. str(e) is the library's message, which names the file, line, tensor, field
    or argument at fault; e.status is the td_status code and e.status_name its short name ("format error")."""

    status = None
    status_name = "error"

    def __init__(self, message, status=None):
        super().__init__(message)
        if status is not None:
            self.status = status

    @property
    def message(self):
        return self.args[0] if self.args else ""


class InvalidArgumentError(Error, ValueError):
    """TD_ERR_INVALID_ARG: an argument that cannot be right."""
    status, status_name = 1, "invalid argument"


class FileError(Error, OSError):
    """TD_ERR_IO: a file could not be opened, read, written or mapped."""
    status, status_name = 2, "i/o error"


class FormatError(Error, ValueError):
    """TD_ERR_FORMAT: a malformed file or input (bad JSON, truncated data, wrong shape, text that is not UTF-8)."""
    status, status_name = 3, "format error"


class UnsupportedError(Error):
    """TD_ERR_UNSUPPORTED: well-formed but not supported here (an architecture, dtype, device, template)."""
    status, status_name = 4, "unsupported"


class OutOfMemoryError(Error, MemoryError):
    """TD_ERR_NOMEM: an allocation failed (the message says what to reduce)."""
    status, status_name = 5, "out of memory"


class RangeError(Error, ValueError):
    """TD_ERR_RANGE: a value out of range (a token id outside the vocabulary, a context that is full)."""
    status, status_name = 6, "out of range"


class StateError(Error, RuntimeError):
    """TD_ERR_STATE: a call the object cannot take now (a pruned head asked to generate, a model without a
    tokenizer asked to decide)."""
    status, status_name = 7, "invalid state"


class NonFiniteError(Error, ArithmeticError):
    """TD_ERR_NONFINITE: a computation gave NaN or infinity (the message names the layer and position)."""
    status, status_name = 8, "non-finite value"


class DeviceError(Error, RuntimeError):
    """TD_ERR_DEVICE: the GPU failed a call."""
    status, status_name = 9, "device error"


BY_STATUS = {c.status: c for c in (InvalidArgumentError, FileError, FormatError, UnsupportedError, OutOfMemoryError,
                                   RangeError, StateError, NonFiniteError, DeviceError)}
