"""One member process of the tests of groups across processes
(test_group_processes.py): `python group_worker.py CONFIG_JSON`. Prints one
JSON line per event; writes arrays as .npy files into the config's folder."""
import json
import os
import socket
import sys
import time

import numpy as np

import axrt

try:
    import ml_dtypes

    BFLOAT16 = ml_dtypes.bfloat16
except ImportError:  # the tests skip bfloat16 then
    BFLOAT16 = None


def free_port():
    """A loopback TCP port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def transport_missing():
    """Why this build cannot join groups across processes, or None when it can."""
    try:
        with axrt.init_group(rendezvous=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1,
                             timeout=5):
            return None
    except axrt.UnavailableError as e:
        return str(e)


def dtype_of(name):
    return BFLOAT16 if name == "bfloat16" else np.dtype(name)


def make_input(rank, case, dtype_name, count):
    """Member `rank`'s vector of case `case`: small integers and halves, so
    that every dtype holds them, with signs mixed."""
    rng = np.random.default_rng(1000 * case + rank)
    values = rng.integers(-40, 40, size=count) / 2.0
    if dtype_name.startswith(("int", "uint")):
        values = rng.integers(0 if dtype_name.startswith("u") else -100, 100, size=count)
    return values.astype(dtype_of(dtype_name))


def emit(**event):
    print(json.dumps(event), flush=True)


def join(config, name=None):
    rendezvous = config["rendezvous"] + (name or "")
    return axrt.init_group(
        rendezvous=rendezvous if not config.get("env") else None,
        rank=config.get("rank"),
        world_size=config.get("size"),
        timeout=config.get("timeout", 30),
        heartbeat_timeout=config.get("heartbeat_timeout"),
        collective_timeout=config.get("collective_timeout"),
    )


def collectives(config):
    out = config["dir"]
    with join(config) as member:
        emit(event="joined", rank=member.rank, size=member.size)
        for i, (kind, dtype_name, count, op, root) in enumerate(config["cases"]):
            x = make_input(member.rank, i, dtype_name, count * (member.size if kind == "reduce_scatter" else 1))
            if kind == "all_reduce":
                result = member.all_reduce(x, op)
            elif kind == "all_gather":
                result = member.all_gather(x)
            elif kind == "reduce_scatter":
                result = member.reduce_scatter(x, op)
            else:
                result = member.broadcast(x, root)
            np.save(os.path.join(out, f"r{member.rank}_{i}.npy"), np.asarray(result).view(np.uint8))
        member.barrier()
        emit(event="done", info=member.info())


def until_error(config):
    """Runs all-reduces until one fails; then, if asked, joins the group
    named `rejoin` and runs one more."""
    with join(config) as member:
        emit(event="joined", rank=member.rank)
        if config.get("die") == member.rank:
            time.sleep(config.get("die_after", 0.5))
            emit(event="dying")
            os.kill(os.getpid(), config.get("signal", 9))
            time.sleep(60)
        start = time.monotonic()
        count = 0
        try:
            while time.monotonic() - start < 60:
                x = np.ones(1000, np.float32)
                member.all_reduce(x)
                count += 1
        except axrt.Error as e:
            emit(event="failed", after=count, error=type(e).__name__, message=str(e), info=member.info(),
                 at=time.time())
    if config.get("rejoin") is not None:
        rejoin(config)


def rejoin(config):
    with join(config, config["rejoin"]) as member:
        x = np.full(5, member.rank + 1, np.float32)
        member.all_reduce(x)
        emit(event="rejoined", rank=member.rank, size=member.size, result=x.tolist())


def join_only(config):
    try:
        with join(config) as member:
            member.barrier()
            emit(event="joined", rank=member.rank, size=member.size, info=member.info())
            time.sleep(config.get("hold", 0))
    except (axrt.Error, ValueError) as e:
        emit(event="refused", error=type(e).__name__, message=str(e))


if __name__ == "__main__":
    cfg = json.loads(sys.argv[1])
    {"collectives": collectives, "until_error": until_error, "join_only": join_only,
     "rejoin": rejoin}[cfg["scenario"]](cfg)
