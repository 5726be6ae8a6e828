"""axrt.profile, axrt.profile.range, axrt.stats and AXRT_TRACE (docs/profiling.md):
the trace files are parsed and checked against the documented shape, not just
found."""
import json
import os
import subprocess
import sys
import threading
from collections import Counter, defaultdict

import numpy as np
import pytest

import axrt
import axrt.llm
from serving_support import tiny_llama_path  # noqa: F401 (a fixture)

LAYERS = 4  # tests/llm/data/tiny-llama
PHASES = {"M", "X", "C", "i", "s", "f"}
# Timestamps are microseconds with three decimals: exact nanoseconds.
EPS = 1e-6


def load_trace(path):
    with open(path) as f:
        trace = json.load(f)
    assert set(trace) == {"displayTimeUnit", "otherData", "traceEvents"}
    assert trace["otherData"]["producer"].startswith("axrt ")
    for e in trace["traceEvents"]:
        assert e["ph"] in PHASES, e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        if e["ph"] == "M":
            assert e["name"] in {"process_name", "thread_name", "process_sort_index"}, e
            continue
        assert isinstance(e["name"], str) and e["name"], e
        assert e["ts"] >= 0, e
        if e["ph"] == "X":
            assert e["dur"] >= 0, e
            assert e["cat"] in {"api", "function", "kernel", "copy", "fill", "host", "sync",
                                "range", "serving"}, e
    return trace


def events(trace, ph=None, cat=None, name=None):
    return [e for e in trace["traceEvents"]
            if (ph is None or e["ph"] == ph) and (cat is None or e.get("cat") == cat)
            and (name is None or e["name"] == name)]


def inside(child, parent):
    return (child["ts"] >= parent["ts"] - EPS
            and child["ts"] + child["dur"] <= parent["ts"] + parent["dur"] + EPS)


def check_streams(trace):
    """Every command slice lies inside exactly one function slice of its track,
    and each function slice holds one slice per command."""
    by_track = defaultdict(list)
    for e in events(trace, "X"):
        if e["pid"] != 1:
            by_track[(e["pid"], e["tid"])].append(e)
    for track in by_track.values():
        functions = [e for e in track if e["cat"] == "function"]
        commands = [e for e in track if "command" in e.get("args", {})]
        for c in commands:
            assert sum(inside(c, f) for f in functions) == 1, c
        for f in functions:
            held = [c for c in commands if inside(c, f)]
            assert sorted(c["args"]["command"] for c in held) == list(range(f["args"]["commands"]))
        # Operations on one stream run one after another.
        tops = sorted((e for e in track if "command" not in e.get("args", {})),
                      key=lambda e: e["ts"])
        for a, b in zip(tops, tops[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + EPS, (a, b)


def check_flows(trace):
    starts = events(trace, "s")
    ends = events(trace, "f")
    assert Counter(e["id"] for e in starts) == Counter(e["id"] for e in ends)
    assert all(v == 1 for v in Counter(e["id"] for e in starts).values())
    start_of = {e["id"]: e for e in starts}
    for f in ends:
        s = start_of[f["id"]]
        assert f["ts"] >= s["ts"] - EPS
        assert f["bp"] == "e"
        # The start lies on an API call, the end on the operation it queued.
        assert any(e["tid"] == s["tid"] and abs(e["ts"] - s["ts"]) < EPS
                   for e in events(trace, "X", "api"))
        assert any(e["tid"] == f["tid"] and abs(e["ts"] - f["ts"]) < EPS and e["pid"] != 1
                   for e in events(trace, "X"))


def check_counters(trace):
    series = defaultdict(list)
    for e in events(trace, "C"):
        series[(e["pid"], e["name"])].append(e)
    for (pid, name), samples in series.items():
        samples.sort(key=lambda e: e["ts"])
        if name.endswith(" allocations"):
            counts = [e["args"]["allocations"] for e in samples]
            assert counts == sorted(counts), name
        else:
            for e in samples:
                assert 0 <= e["args"]["bytes_in_use"] <= e["args"]["bytes_reserved"], e
    return series


@pytest.fixture(scope="module")
def model(tiny_llama_path):
    return axrt.llm.load(tiny_llama_path)


def test_llama_generation_trace(model, tmp_path):
    path = tmp_path / "generate.json"
    before = axrt.stats()
    with axrt.profile(path) as p:
        with axrt.profile.range("generate"):
            tokens = model.generate([1, 5, 9, 3], max_new_tokens=4)
    assert tokens == model.generate([1, 5, 9, 3], max_new_tokens=4)
    assert p.result["dropped_events"] == 0
    assert p.result["bytes_written"] == os.path.getsize(path)
    trace = load_trace(path)
    assert p.result["events"] == len(trace["traceEvents"])
    check_streams(trace)
    check_flows(trace)
    check_counters(trace)

    # The serving engine's steps (generate serves one request): the prompt,
    # then a token a step, each sampled.
    functions = events(trace, "X", "function")
    names = Counter(f["name"] for f in functions)
    assert names["step"] == 4 and names["sample"] == 4
    # Every layer's kernels, in every model call.
    for f in functions:
        if f["name"] != "step":
            continue
        assert f["args"]["executable"].endswith("tiny-llama.axe")
        kernels = Counter(k["name"] for k in events(trace, "X", "kernel")
                          if k["tid"] == f["tid"] and inside(k, f))
        assert kernels["axrt_attention_decode_f32"] == LAYERS, kernels
        assert kernels["axrt_kv_cache_write_f32"] == LAYERS, kernels
        assert kernels["axrt_rope_f32"] == LAYERS, kernels
        assert kernels["axrt_silu_mul_f32"] == LAYERS, kernels
        assert kernels["axrt_rmsnorm_f32"] == 2 * LAYERS + 1, kernels
    for k in events(trace, "X", "kernel"):
        assert all(n >= 1 for n in k["args"]["workgroup_size"])
        assert len(k["args"]["workgroup_count"]) == 3
    # Each invocation is an API call whose flow reaches its function slice.
    calls = events(trace, "X", "api", "axrt_function_invoke")
    assert len(calls) == len(functions)
    assert sorted(c["args"]["what"] for c in calls) == sorted(f["name"] for f in functions)
    # (The engine's copies of each step's inputs and results are flows too.)
    assert len(events(trace, "s")) >= len(functions)
    # The range encloses the calls made inside it, which the engine's thread
    # makes, one after the other.
    (outer,) = events(trace, "X", "range", "generate")
    assert all(inside(c, outer) for c in calls)
    assert len({c["tid"] for c in calls}) == 1 and calls[0]["tid"] != outer["tid"]
    # Names of the tracks.
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events(trace, "M", name="thread_name")}
    assert any(n.startswith("stream ") for n in names.values())
    processes = {e["args"]["name"] for e in events(trace, "M", name="process_name")}
    assert "cpu:0" in processes

    after = axrt.stats()
    streams = after["cpu:0"]["streams"]
    assert streams["function_calls"] - before["cpu:0"]["streams"]["function_calls"] >= len(calls)
    assert streams["dispatches"] > before["cpu:0"]["streams"]["dispatches"]
    assert set(after["cpu:0"]["pool"]) >= {"bytes_in_use", "bytes_reserved"}


def test_traceplot_draws_the_trace(model, tmp_path):
    pytest.importorskip("matplotlib", reason="tools/bootstrap.sh installs matplotlib")
    from axrt import traceplot
    path = tmp_path / "plot.json"
    with axrt.profile(path):
        model.generate([3, 4, 5], max_new_tokens=2)
    out = tmp_path / "plot.png"
    assert traceplot.main([str(path), str(out), "--title", "tiny-llama"]) == 0
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert traceplot.main([str(tmp_path / "missing.json"), str(out)]) == 1
    (tmp_path / "bad.json").write_text("{\"not\": \"a trace\"}")
    assert traceplot.main([str(tmp_path / "bad.json"), str(out)]) == 1


def test_ranges_nest_per_thread_and_decorate(tmp_path):
    path = tmp_path / "ranges.json"

    @axrt.profile.range("decorated")
    def work(n):
        with axrt.profile.range(f"inner {n}"):
            return n * 2

    def thread_main(n):
        with axrt.profile.range(f"thread {n}"):
            work(n)

    with axrt.profile(path):
        assert axrt.profile.is_active()
        threads = [threading.Thread(target=thread_main, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert work(7) == 14
    assert not axrt.profile.is_active()
    trace = load_trace(path)
    ranges = events(trace, "X", "range")
    assert Counter(r["name"] for r in ranges)["decorated"] == 4
    for n in range(3):
        (outer,) = [r for r in ranges if r["name"] == f"thread {n}"]
        (inner,) = [r for r in ranges if r["name"] == f"inner {n}"]
        assert inner["tid"] == outer["tid"] and inside(inner, outer)
    assert len({r["tid"] for r in ranges}) == 4
    assert all("unterminated" not in r.get("args", {}) for r in ranges)


def test_engine_steps_in_the_trace(tiny_llama_path, tmp_path):
    path = tmp_path / "engine.json"
    prompts = [[1, 2, 3, 4, 5], [7, 8, 9], list(range(20, 40))]
    with axrt.llm.Engine(tiny_llama_path, num_blocks=64) as engine:
        with axrt.profile(path):
            out = engine.generate(prompts, 6)
    assert all(len(o) == 6 for o in out)
    trace = load_trace(path)
    check_streams(trace)
    check_flows(trace)
    steps = events(trace, "X", "serving", "engine step")
    assert steps
    assert sum(s["args"]["prefill_tokens"] for s in steps) >= sum(map(len, prompts))
    assert sum(s["args"]["decode_tokens"] for s in steps) >= 3 * 5
    # How many of the three share a step depends on when each was added
    # relative to the engine's steps (the first may finish before the last
    # arrives); each step runs between one and all three.
    assert all(1 <= s["args"]["sequences"] <= 3 for s in steps)
    assert all(s["args"]["kv_blocks_in_use"] >= 1 for s in steps)
    calls = events(trace, "X", "api", "axrt_function_invoke")
    for s in steps:
        assert any(c["tid"] == s["tid"] and inside(c, s) and c["args"]["what"] == "step"
                   for c in calls)


def test_refusals_and_limits(tmp_path):
    path = tmp_path / "one.json"
    with axrt.profile(path):
        with pytest.raises(axrt.FailedPreconditionError, match="already running"):
            axrt.profile(tmp_path / "two.json").start()
    with pytest.raises(axrt.NotFoundError, match="no-such-dir"):
        axrt.profile(tmp_path / "no-such-dir" / "t.json").start()
    assert not axrt.profile.is_active()
    with pytest.raises(RuntimeError, match="not running"):
        axrt.profile(path).stop()
    with pytest.raises(ValueError):
        axrt.profile(path, max_events=-1)
    with pytest.raises(TypeError):
        axrt.profile.range(3)
    # A bounded trace drops what does not fit, counts it, and stays valid.
    with axrt.profile(path, max_events=1) as p:
        for i in range(3000):
            with axrt.profile.range("r"):
                pass
    assert p.result["dropped_events"] > 0
    trace = load_trace(path)
    assert trace["otherData"]["dropped_events"] == p.result["dropped_events"]
    assert p.result["events"] == len(trace["traceEvents"])


SCRIPT = """
import axrt.llm, sys
model = axrt.llm.load(sys.argv[1])
print(model.generate([1, 2, 3], max_new_tokens=3))
"""


def test_environment_variable_traces_a_whole_process(tiny_llama_path, tmp_path):
    path = tmp_path / "env.json"
    env = dict(os.environ, AXRT_TRACE=str(path))
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(tiny_llama_path)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    trace = load_trace(path)
    check_streams(trace)
    check_flows(trace)
    assert len(events(trace, "X", "function", "step")) == 3
    # A path that cannot be written: a warning, and the program runs untraced.
    env["AXRT_TRACE"] = str(tmp_path / "no-such-dir" / "env.json")
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(tiny_llama_path)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "AXRT_TRACE" in result.stderr and "no-such-dir" in result.stderr
