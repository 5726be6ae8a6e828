"""Serving a tensor-parallel set across processes against the same set in one process,
in one run.

The model is llm_bench.py's (about 125 M parameters, random weights from a fixed
seed, built locally under --model-dir; nothing is downloaded), converted into a
set of two shards (f32, no CUDA variants). The workload: --requests requests of
--prompt-len random prompt tokens each generating --output-len tokens (greedy, no
stop ids), all submitted at once through axrt.llm.Engine; output tokens/s counts
the generated tokens, from the first submission to the last token.

  - one process: the set on cpu:0 and cpu:1 (AXRT_CPU_DEVICES=2) of one process,
    its member threads and the in-process "cpu" group;
  - two processes: rank 0's Engine(path, device="cpu:0", group=member) and rank 1's
    axrt.llm.follow(path, member), the group across processes on 127.0.0.1
    (docs/multi-device.md, "Serving across processes").

Each side runs --repeats times, alternating; the best is reported, with the ratio.

    PYTHONPATH=build/release/python python3 tests/bench/set_processes_bench.py
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

RUN = r"""
import json, os, sys, time, numpy as np
import axrt, axrt.llm
args = json.loads(sys.argv[1])
rng = np.random.default_rng(0)
def workload(vocab):
    return [rng.integers(0, vocab, size=args["prompt_len"]).tolist() for _ in range(args["requests"])]
def measure(engine):
    prompts = workload(engine.config.vocab_size)
    start = time.perf_counter()
    requests = [engine.submit(p, args["output_len"], stop_ids=()) for p in prompts]
    tokens = sum(sum(1 for e in r if e.token >= 0) for r in requests)
    return tokens / (time.perf_counter() - start)
if args["mode"] == "one":
    with axrt.llm.Engine(args["model"], devices=["cpu:0", "cpu:1"]) as engine:
        print(json.dumps({"tok_s": measure(engine)}))
elif args["rank"] == 0:
    member = axrt.init_group(rendezvous=args["rdv"], rank=0, world_size=2, timeout=120)
    with axrt.llm.Engine(args["model"], device="cpu:0", group=member) as engine:
        print(json.dumps({"tok_s": measure(engine)}))
    member.close()
else:
    member = axrt.init_group(rendezvous=args["rdv"], rank=1, world_size=2, timeout=120)
    axrt.llm.follow(args["model"], member)
    member.close()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_one(args, model: Path) -> float:
    env = dict(os.environ, AXRT_CPU_DEVICES="2")
    config = dict(vars(args), mode="one", model=str(model))
    out = subprocess.run([sys.executable, "-c", RUN, json.dumps(config)], env=env, check=True,
                         capture_output=True, text=True, timeout=1800).stdout
    return json.loads(out.strip().splitlines()[-1])["tok_s"]


def run_two(args, model: Path) -> float:
    env = dict(os.environ)
    env.pop("AXRT_CPU_DEVICES", None)
    rdv = f"tcp://127.0.0.1:{free_port()}"
    procs = []
    for rank in (1, 0):
        config = dict(vars(args), mode="two", model=str(model), rank=rank, rdv=rdv)
        procs.append(subprocess.Popen([sys.executable, "-c", RUN, json.dumps(config)], env=env,
                                      stdout=subprocess.PIPE, text=True))
    out = procs[1].communicate(timeout=1800)[0]
    procs[0].wait(timeout=60)
    return json.loads(out.strip().splitlines()[-1])["tok_s"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-dir", default="build/bench/llm",
                        help="llm_bench.py's checkpoint directory (made by it when missing)")
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model_dir = Path(args.model_dir)
    if not (model_dir / "config.json").exists():
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import llm_bench

        llm_bench.build_checkpoint(model_dir)
    model = model_dir / "model-f32.tp2"
    if not model.exists():
        import axrt.llm

        axrt.llm.convert(model_dir, model, weights="f32", cuda=False, tensor_parallel=2)
    one, two = [], []
    for _ in range(args.repeats):
        one.append(run_one(args, model))
        two.append(run_two(args, model))
    print(f"TP=2, {args.requests} requests x ({args.prompt_len} prompt + {args.output_len} "
          f"output) tokens, {os.cpu_count()} CPUs; output tok/s, best of {args.repeats}")
    print(f"  one process:    {max(one):8.1f}   (runs: {', '.join(f'{x:.1f}' for x in one)})")
    print(f"  two processes:  {max(two):8.1f}   (runs: {', '.join(f'{x:.1f}' for x in two)})")
    print(f"  ratio two/one:  {max(two) / max(one):8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
