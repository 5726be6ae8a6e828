"""Profiling: ``with axrt.profile("trace.json"):``, ``axrt.profile.range``
and ``axrt.stats()`` (docs/profiling.md)."""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Dict, Optional, TypeVar

from . import _axrt

__all__ = ["profile", "stats"]

_F = TypeVar("_F", bound=Callable[..., Any])


class _Range:
    """A named range on the calling thread, as a context manager or a decorator."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"a range name must be a str, got {type(name).__name__}")
        self.name = name

    def __enter__(self) -> "_Range":
        _axrt._trace_range_begin(self.name)
        return self

    def __exit__(self, *exc: object) -> None:
        _axrt._trace_range_end()

    def __call__(self, function: _F) -> _F:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return function(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class profile:
    """Traces everything axrt does inside a ``with`` block into a Chrome Trace
    Event JSON file that the Perfetto UI (ui.perfetto.dev) opens::

        with axrt.profile("trace.json") as p:
            with axrt.profile.range("prefill"):
                model.generate(...)
        print(p.result)   # {'events': ..., 'dropped_events': ..., 'bytes_written': ...}

    The file is written when the block ends; work still queued keeps running.
    One trace runs at a time in a process: starting a second one raises
    axrt.FailedPreconditionError. ``max_events`` bounds the trace (0: the
    library's default of 1,048,576); later events are dropped and counted in
    ``result["dropped_events"]``.
    """

    def __init__(self, path: "str | os.PathLike[str]", *, max_events: int = 0) -> None:
        self.path = os.fspath(path)
        if max_events < 0:
            raise ValueError(f"max_events must be >= 0, got {max_events}")
        self.max_events = max_events
        self.result: Optional[Dict[str, int]] = None
        self._running = False

    def start(self) -> "profile":
        """Starts the trace (what entering the ``with`` block does)."""
        _axrt._trace_start(self.path, self.max_events)
        self._running = True
        return self

    def stop(self) -> Dict[str, int]:
        """Stops the trace and writes the file; returns (and keeps in
        ``result``) how many events it holds and dropped."""
        if not self._running:
            raise RuntimeError("this profile is not running")
        self._running = False
        self.result = _axrt._trace_stop()
        return self.result

    def __enter__(self) -> "profile":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self._running:
            self.stop()

    @staticmethod
    def range(name: str) -> _Range:
        """A range named ``name`` in the trace, on the calling thread: a context
        manager (``with axrt.profile.range("step"):``) or a decorator. Ranges nest
        and enclose the axrt calls made inside them; they cost almost nothing
        when no trace runs."""
        return _Range(name)

    @staticmethod
    def is_active() -> bool:
        """Whether a trace runs in this process (here or through AXRT_TRACE)."""
        return _axrt._trace_is_active()


def stats() -> Dict[str, Dict[str, Dict[str, int]]]:
    """Counters of every device, by device id: ``pool`` (bytes in use and
    reserved, peak, allocations served and reused, deallocations, trims) and
    ``streams`` (work queued on its streams since the process started: copies
    and bytes, fills, host functions, event records and waits, deallocations,
    function calls and their kernel dispatches, stream failures)."""
    out: Dict[str, Dict[str, Dict[str, int]]] = {}
    for device in _axrt.devices():
        out[device.id] = {
            "pool": device.pool_statistics(),
            "streams": _axrt._stream_statistics(device),
        }
    return out
