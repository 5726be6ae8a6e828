"""The Python package on a GPU, the `python` step of tools/gpu_check.sh.

    python3 gpu_python_check.py BUNDLE DEVICE OUT

Runs with the GPU machine's own interpreter (its numpy and ml_dtypes), the
package coming from the bundle (tools/gpu_bundle.sh --python). Checks,
writing OUT/python.md:
  - the package imports and sees DEVICE;
  - tensors: numpy to the device and back, a copy between the CPU and the
    device on a stream, DLPack export of a device tensor with its device;
  - every model of the bundle through axrt.llm.Engine on DEVICE: the greedy
    tokens the CPU device gives (BUNDLE/models/NAME.tokens), the logits
    after the prompt within 1e-3 of the largest of the CPU's, and a
    Session's logits equal to the engine's; and three requests at once with
    graph_max_batch=4 (decode steps replayed from CUDA graphs, one padded)
    giving the tokens and logits of the same requests as calls, bit for bit.
Exits 0 when every check passed.
"""
import sys
import time
from pathlib import Path

import numpy as np


def main() -> int:
    bundle, device_id, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    rows = []
    failed = 0

    def check(what: str, ok: bool, detail: str = "") -> None:
        nonlocal failed
        rows.append(f"| {what} | {'passed' if ok else 'FAILED'} | {detail} |")
        failed += 0 if ok else 1
        print(f"python: {what}: {'passed' if ok else 'FAILED'} {detail}", flush=True)

    import axrt
    import axrt.llm

    ids = [str(d.id) for d in axrt.devices()]
    check("import, devices", device_id in ids,
          f"axrt {axrt.__version__}, Python {sys.version.split()[0]}, numpy {np.__version__}: "
          f"{', '.join(ids)}")
    if device_id not in ids:
        return finish(out, rows, 1)
    device = axrt.device(device_id)

    x = np.arange(1 << 20, dtype=np.float32) * 0.5
    t = axrt.asarray(x, device=device)
    check("numpy to the device and back", np.array_equal(t.numpy(), x), f"{x.nbytes} bytes")
    stream = axrt.Stream(device=device)
    back = t.to(axrt.device("cpu:0"), stream=stream)
    back.synchronize()
    check("a copy to the CPU device on a stream", np.array_equal(back.numpy(), x))
    capsule_device = t.__dlpack_device__()
    check("DLPack device of a device tensor", capsule_device[0] == 2, str(capsule_device))

    for model in sorted((bundle / "models").glob("*.axe")):
        stem = str(model)[:-len(".axe")]
        name = Path(stem).name
        try:
            check_model(model, stem, name, device_id, check)
        except Exception as e:  # one model's failure is reported, and the others run
            check(f"{name}: runs", False, f"{type(e).__name__}: {e}")
    return finish(out, rows, failed)


def check_model(model: Path, stem: str, name: str, device_id: str, check) -> None:
    import axrt.llm

    prompt = [int(v) for v in Path(stem + ".prompt").read_text().split(",")]
    want = [int(v) for v in Path(stem + ".tokens").read_text().split()]
    start = time.perf_counter()
    with axrt.llm.Engine(model, device=device_id) as engine:
        events = list(engine.submit(prompt, len(want), stop_ids=(), logits=True))
    seconds = time.perf_counter() - start
    with axrt.llm.Engine(model, device="cpu:0") as cpu:
        (on_cpu,) = cpu.submit(prompt, 1, stop_ids=(), logits=True)
    got = [e.token for e in events]
    check(f"{name}: engine tokens = the CPU's", got == want,
          f"{len(got)} tokens, {seconds:.1f} s" + ("" if got == want else f": {got}"))
    scale = float(np.max(np.abs(on_cpu.logits)))
    diff = float(np.max(np.abs(events[0].logits.astype(np.float64) - on_cpu.logits)))
    check(f"{name}: logits after the prompt", diff <= 1e-3 * scale,
          f"{diff:.2e} from the CPU's (largest {scale:.2e})")
    llm = axrt.llm.load(model, device=device_id)
    with llm, llm.session() as seq:
        logits = seq.prefill(prompt)
    check(f"{name}: a session's logits = the engine's", np.array_equal(logits, events[0].logits))
    check_graphs(model, name, prompt, len(want), device_id, check)


def check_graphs(model: Path, name: str, prompt, count: int, device_id: str, check) -> None:
    import axrt.llm

    prompts = [prompt, prompt[1:] or prompt, prompt[:-1] or prompt]
    runs = []
    for graph_max_batch in (0, 4):
        start = time.perf_counter()
        with axrt.llm.Engine(model, device=device_id, graph_max_batch=graph_max_batch) as engine:
            requests = [engine.submit(p, count, stop_ids=(), logits=True) for p in prompts]
            events = [list(r) for r in requests]
            stats = engine.stats()
        runs.append((events, stats, time.perf_counter() - start))
    (calls, _, call_s), (graphed, stats, graph_s) = runs
    same = all([e.token for e in a] == [e.token for e in b] and
               all(np.array_equal(x.logits.view(np.uint32), y.logits.view(np.uint32))
                   for x, y in zip(a, b))
               for a, b in zip(calls, graphed))
    check(f"{name}: graph steps = calls", same and stats["graph_steps"] > 0,
          f"{stats['graph_steps']} of {stats['steps']} steps from "
          f"{stats['graphs_captured']} graphs; {graph_s:.1f} s against {call_s:.1f} s as calls")


def finish(out: Path, rows, failed: int) -> int:
    (out / "python.md").write_text("| check | result | detail |\n|---|---|---|\n" +
                                   "\n".join(rows) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
