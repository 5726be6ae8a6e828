"""A tensor-parallel set across processes (docs/multi-device.md, "Serving across processes").

The head (rank 0) runs :class:`ProcessSet`: it joins the group, makes the engine
(``Engine(path, group=member)``), and, when a member is lost, ends the requests
running (the engine's steps fail naming the member), reports why through
``failure`` (the server's ``/health`` says 503 with it), and joins the group's next
epoch, where the members left and a replacement meet it, making a new engine: the
server serves again without restarting. Every other rank runs :func:`run_member`:
it joins, follows the head's steps, and joins again after a failure, until the
head closes its engine or is gone.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Optional

from .. import Error, init_group
from .engine import Engine, follow


class ProcessSet:
    """The head's side of a set across processes: behaves as its current :class:`Engine`
    (attributes are the engine's), with ``failure`` saying why it cannot serve while it
    waits for the members to come back."""

    def __init__(self, model, *, rendezvous: str, world_size: int, device=None,
                 join_timeout: float = 60.0, heartbeat_timeout: Optional[float] = None,
                 poll_interval: float = 0.1, **engine_options: Any) -> None:
        self._model = model
        self._join = dict(rendezvous=rendezvous, rank=0, world_size=world_size,
                          timeout=join_timeout, heartbeat_timeout=heartbeat_timeout)
        self._device = device
        self._options = engine_options
        self._poll = poll_interval
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._waiting: Optional[str] = None
        #: How many times the set was rebuilt after a lost member.
        self.rebuilds = 0
        self._member, self._engine = self._start()
        self._watcher = threading.Thread(target=self._watch, name="axrt-process-set", daemon=True)
        self._watcher.start()

    def _start(self):
        member = init_group(self._device, **self._join)
        try:
            engine = Engine(self._model, self._device, group=member, **self._options)
        except BaseException:
            member.close()
            raise
        return member, engine

    def _watch(self) -> None:
        while not self._closed.wait(self._poll):
            info = self._member.info()
            if info["state"] == "active":
                continue
            reason = f"member {info['failed_rank']} of the set was lost: {info['failure']}"
            with self._lock:
                self._waiting = f"{reason}; waiting for the set's members to join again"
                engine, member = self._engine, self._member
            # The requests running end (their steps failed, naming the member); the
            # engine and the group go, and the head opens the group's next epoch.
            engine.close()
            member.close()
            while not self._closed.is_set():
                try:
                    fresh_member, fresh_engine = self._start()
                except Exception as e:  # noqa: BLE001 - said by /health, and tried again
                    with self._lock:
                        self._waiting = f"{reason}; waiting for the set's members to join again ({e})"
                    continue
                with self._lock:
                    if self._closed.is_set():
                        fresh_engine.close()
                        fresh_member.close()
                        return
                    self._member, self._engine = fresh_member, fresh_engine
                    self._waiting = None
                    self.rebuilds += 1
                break

    @property
    def engine(self) -> Engine:
        with self._lock:
            return self._engine

    @property
    def failure(self) -> Optional[str]:
        with self._lock:
            if self._waiting is not None:
                return self._waiting
            engine = self._engine
        return engine.failure

    def _submit_checked_async(self, *args, **kwargs):
        with self._lock:
            waiting, engine = self._waiting, self._engine
        if waiting is not None:
            raise RuntimeError(waiting)
        return engine._submit_checked_async(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.engine, name)

    def close(self) -> None:
        """Closes the engine (the members' follow() return) and leaves the group."""
        self._closed.set()
        if self._watcher.is_alive() and self._watcher is not threading.current_thread():
            self._watcher.join()
        with self._lock:
            engine, member = self._engine, self._member
        engine.close()
        member.close()

    def __enter__(self) -> "ProcessSet":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_member(model, *, rendezvous: str, world_size: int, rank: int, device=None,
               join_timeout: float = 60.0, heartbeat_timeout: Optional[float] = None,
               log=sys.stderr) -> int:
    """Runs rank `rank` (1 or more) of the set until the head closes its engine (0) or is
    gone (1): after a failure of another member it joins the group's next epoch."""
    while True:
        try:
            member = init_group(device, rendezvous=rendezvous, rank=rank, world_size=world_size,
                                timeout=join_timeout, heartbeat_timeout=heartbeat_timeout)
        except Error as e:
            print(f"axrt.llm: rank {rank} could not join the set: {e}", file=log, flush=True)
            return 1
        try:
            print(f"axrt.llm: rank {rank} of {world_size} joined the set at {rendezvous}",
                  file=log, flush=True)
            follow(model, member, device)
            return 0
        except Error as e:
            # Join again: the head opens the group's next epoch, unless it is gone, which
            # the next join says (its rendezvous no longer answers).
            print(f"axrt.llm: rank {rank}: the set failed: {e}", file=log, flush=True)
            time.sleep(0.1)
        finally:
            member.close()
