"""axrt: load and run .axe executables from Python.

    import axrt, numpy as np
    exe = axrt.load("model.axe")          # onto the default device
    y = exe.main(np.ones((4, 256), np.float32))
    print(y.numpy())

Calls take numpy arrays, any DLPack producer (JAX, PyTorch, CuPy) or
axrt.Tensor, and return axrt.Tensor, which numpy, JAX and PyTorch take back
without a copy (DLPack, the buffer protocol, __array__). See docs/python.md.
"""

from ._axrt import (
    AbortedError,
    AlreadyExistsError,
    CancelledError,
    DataLossError,
    DeadlineExceededError,
    Device,
    DeviceLostError,
    Error,
    Event,
    Executable,
    FailedPreconditionError,
    Function,
    Group,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    Stream,
    Tensor,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
    __version__,
    asarray,
    device,
    devices,
    drivers,
    empty,
    from_dlpack,
    group,
    load,
)
from . import builder
from ._profile import profile, stats
from .distributed import GroupMember, init_group
from .builder import Builder

__all__ = [
    "AbortedError",
    "AlreadyExistsError",
    "Builder",
    "CancelledError",
    "DataLossError",
    "DeadlineExceededError",
    "Device",
    "DeviceLostError",
    "Error",
    "Event",
    "Executable",
    "FailedPreconditionError",
    "Function",
    "Group",
    "GroupMember",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "Stream",
    "Tensor",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "__version__",
    "asarray",
    "builder",
    "device",
    "devices",
    "drivers",
    "empty",
    "from_dlpack",
    "group",
    "init_group",
    "load",
    "profile",
    "stats",
]
