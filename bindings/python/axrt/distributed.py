"""Device groups across processes and hosts: ``axrt.init_group()``.

Every process of a group calls ``init_group()`` with its own rank; they meet
through a rendezvous (docs/multi-device.md, "Across processes"):

- ``None`` or ``"env://"``: torchrun's environment: ``MASTER_ADDR``,
  ``MASTER_PORT``, ``RANK`` and ``WORLD_SIZE``;
- ``"tcp://HOST:PORT[/NAME]"``: rank 0 serves the rendezvous on HOST:PORT;
- ``"file://DIR[#NAME]"``: a directory every member can write.

``rank`` and ``world_size`` come from the arguments, else from ``RANK`` and
``WORLD_SIZE``.
"""

from __future__ import annotations

import os

from ._axrt import GroupMember, _join_group

__all__ = ["GroupMember", "init_group", "rendezvous_from_env"]


def _env_int(name: str) -> int | None:
    text = os.environ.get(name)
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not an integer") from None


def rendezvous_from_env() -> str:
    """The rendezvous torchrun's environment names: ``tcp://MASTER_ADDR:MASTER_PORT``."""
    address = os.environ.get("MASTER_ADDR")
    port = os.environ.get("MASTER_PORT")
    if not address or not port:
        raise ValueError(
            "no rendezvous given, and torchrun's environment is not set (MASTER_ADDR and "
            "MASTER_PORT); pass rendezvous='tcp://HOST:PORT' or 'file://DIR'"
        )
    host = f"[{address}]" if ":" in address and not address.startswith("[") else address
    return f"tcp://{host}:{port}"


def init_group(
    device=None,
    *,
    rendezvous: str | None = None,
    rank: int | None = None,
    world_size: int | None = None,
    timeout: float = 60.0,
    collective_timeout: float | None = None,
    heartbeat_interval: float | None = None,
    heartbeat_timeout: float | None = None,
    hostname: str | None = None,
    label: str | None = None,
) -> GroupMember:
    """Joins a device group across processes and returns this process's member.

    ``device``: this member's device (default ``"cpu:0"``). ``timeout``:
    seconds to wait for every member to arrive and connect (a member that
    never arrives, a duplicate rank or a different world size raise an
    ``axrt.Error`` naming it within that time). ``collective_timeout``:
    seconds a collective waits for the other members (default 300).
    ``heartbeat_interval`` / ``heartbeat_timeout``: how often members tell
    each other they are alive (default 1 s), and how late a beat may be
    before the member counts as lost (default 10 s). ``hostname``: the
    address this member listens on for the others (default: the address it
    reaches the rendezvous from).
    """
    if rendezvous is None or rendezvous == "env://":
        rendezvous = rendezvous_from_env()
    if not isinstance(rendezvous, str):
        raise TypeError(f"rendezvous must be a string, not {type(rendezvous).__name__}")
    if rank is None:
        rank = _env_int("RANK")
    if world_size is None:
        world_size = _env_int("WORLD_SIZE")
    if rank is None or world_size is None:
        raise ValueError(
            "init_group needs this member's rank and the world size: pass rank= and world_size=, "
            "or set RANK and WORLD_SIZE (torchrun does)"
        )
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in a world of {world_size} members (0 <= rank < world_size)")
    return _join_group(
        rendezvous,
        world_size,
        rank,
        device,
        label=label,
        timeout=collective_timeout,
        rendezvous_timeout=timeout,
        heartbeat_interval=heartbeat_interval,
        heartbeat_timeout=heartbeat_timeout,
        hostname=hostname,
    )
