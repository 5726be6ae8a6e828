"""The serving engine on tensor-parallel sets (docs/multi-device.md, "Serving a set"): the
tiny Llama converted into 2 and 4 shards, served on as many CPU devices with continuous
batching, through the OpenAI-compatible server and the official openai client, against
transformers' greedy tokens (tests/llm/data); a request's logits bitwise the same alone and
among 31 others; a member failing mid-serving; a new set serving again.

Needs AXRT_CPU_DEVICES=4 before axrt makes its instance (set here when run alone)."""
import concurrent.futures
import os

os.environ.setdefault("AXRT_CPU_DEVICES", "4")


import numpy as np
import pytest

import axrt
import axrt.llm
from axrt.llm import Engine
from serving_support import DATA, ids_text, idle, prompts, wait_for
from serving_support import reference as model_reference

openai = pytest.importorskip("openai")
pytest.importorskip("starlette")
from axrt.llm.server import ServerThread, create_app  # noqa: E402

NAME = "tiny-tp"
CPU = [d for d in axrt.devices() if d.type == "cpu"]


def reference() -> dict:
    return model_reference("tiny-llama-tp", "f32")
pytestmark = pytest.mark.skipif(
    len(CPU) < 4, reason=f"needs 4 CPU devices (AXRT_CPU_DEVICES=4 set before axrt makes its "
                         f"instance), has {len(CPU)}")


def devices(n):
    return [f"cpu:{i}" for i in range(n)]





@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    out = tmp_path_factory.mktemp("sets")
    paths = {}
    for ranks in (2, 4):
        paths[ranks] = out / f"tp{ranks}"
        axrt.llm.convert(DATA / "tiny-llama-tp", paths[ranks], weights="f32", cuda=False,
                         tensor_parallel=ranks)
    return paths


@pytest.mark.parametrize("ranks", [2, 4])
def test_served_on_a_set_greedy_output_is_transformers_and_streams_end_cleanly(sets, ranks):
    ref = reference()
    with Engine(sets[ranks], devices=devices(ranks), num_blocks=256) as engine, \
            ServerThread(create_app(engine, model_name=NAME)) as server, \
            openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0,
                          timeout=120) as client:
        assert engine.devices == [axrt.device(d) for d in devices(ranks)]
        tokenizer = engine.tokenizer
        cases = list(prompts(ref))
        for i, prompt in cases:
            want = ref[f"prompt{i}_greedy"].tolist()
            r = client.completions.create(model=NAME, prompt=prompt, max_tokens=len(want),
                                          temperature=0, extra_body={"ignore_eos": True})
            assert r.choices[0].text == ids_text(tokenizer, prompt, want), f"prompt {i}"
            assert r.usage.completion_tokens == len(want)

        # 32 concurrent streams; every other one abandoned after three chunks.
        def one(k):
            i, prompt = cases[k % len(cases)]
            stream = client.completions.create(model=NAME, prompt=prompt, max_tokens=24,
                                               temperature=0, stream=True,
                                               extra_body={"ignore_eos": True})
            if k % 2:
                for n, _ in enumerate(stream):
                    if n == 2:
                        stream.close()
                        return None
            return "".join(c.choices[0].text for c in stream if c.choices)

        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            results = list(pool.map(one, range(32)))
        for k in range(0, 32, 2):
            i, prompt = cases[k % len(cases)]
            want = ref[f"prompt{i}_greedy"].tolist()[:24]
            assert results[k] == ids_text(tokenizer, prompt, want), f"stream {k}"
        # The one block manager serves every member's cache: every block is back.
        wait_for(lambda: idle(engine), what="every KV block to come back")
        assert engine.stats()["failed"] is False


@pytest.mark.parametrize("ranks", [2, 4])
def test_a_requests_logits_are_the_same_alone_and_among_31_others(sets, ranks):
    ref = reference()
    _, prompt = next(prompts(ref))
    with Engine(sets[ranks], devices=devices(ranks), num_blocks=256,
                prefix_caching=False) as engine:
        alone = engine.submit(prompt, 8, stop_ids=(), logits=True)
        alone_logits = [e.logits for e in alone if e.token >= 0]
        rng = np.random.default_rng(3)
        others = [engine.submit(rng.integers(0, 1024, int(rng.integers(1, 90))).tolist(), 8,
                                stop_ids=(), temperature=1.0, seed=k)
                  for k in range(31)]
        crowded = engine.submit(prompt, 8, stop_ids=(), logits=True)
        crowded_logits = [e.logits for e in crowded if e.token >= 0]
        for r in others:
            r.result(timeout=120)
        assert len(alone_logits) == len(crowded_logits) == 8
        for step, (a, b) in enumerate(zip(alone_logits, crowded_logits)):
            assert np.array_equal(a, b), f"step {step}: the logits differ in a batch"


def test_sampling_options_and_choices_on_a_set(sets):
    """The head rank's process_logits runs between the set's step and its sample: greedy
    tokens under penalties are the reference's from the set's own logits, and n choices
    take the prompt from the prefix cache (docs/serving.md, "Sampling options")."""
    from test_sampling_options import processed

    prompt = list(range(20, 60))
    options = dict(repetition_penalty=1.6, presence_penalty=0.5, logit_bias={11: 2.0})
    with Engine(sets[2], devices=devices(2), num_blocks=64) as engine:
        events = list(engine.submit(prompt, 10, stop_ids=(), logits=True, **options))
        tokens = [e.token for e in events]
        for i, e in enumerate(events):
            assert e.token == int(np.argmax(processed(e.logits, prompt, tokens[:i], **options)))
        cached = engine.stats()["cached_prompt_tokens"]
        choices = engine.submit(prompt, 6, stop_ids=(), temperature=1.0, seed=5, n=3,
                                min_p=0.05, frequency_penalty=0.5).result(timeout=120)
        assert len(choices) == 3 and not choices[0] == choices[1] == choices[2]
        # Every choice found the prompt's two full blocks, computed by the first request.
        assert engine.stats()["cached_prompt_tokens"] - cached == 3 * 32
        wait_for(lambda: idle(engine), what="the set to go idle")


def test_a_member_failing_mid_serving_ends_every_request_naming_it(sets):
    with Engine(sets[2], devices=devices(2), num_blocks=256) as engine, \
            ServerThread(create_app(engine, model_name=NAME)) as server, \
            openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0,
                          timeout=120) as client:
        running = [engine.submit([1, 2, 3], 200, stop_ids=()) for _ in range(4)]
        first = [next(iter(r)) for r in running]  # every request has started
        assert all(e.token >= 0 for e in first)
        engine.group.abort(1, "its device was lost")
        for r in running:
            with pytest.raises(axrt.llm.RequestError, match=r"member 1 \(cpu:1\)"):
                r.result(timeout=60)
        wait_for(lambda: engine.failure is not None, what="the engine to fail")
        assert "member 1 (cpu:1) failed: its device was lost" in engine.failure
        with pytest.raises(openai.APIStatusError) as refused:
            client.completions.create(model=NAME, prompt=[1, 2, 3], max_tokens=4)
        assert refused.value.status_code in (500, 503)
        import http.client
        import json
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("GET", "/health")
        response = conn.getresponse()
        body = json.loads(response.read())
        assert response.status == 503 and body["status"] == "failed"
        assert "member 1 (cpu:1)" in body["reason"]
        conn.request("GET", "/metrics")
        metrics = conn.getresponse().read().decode()
        conn.close()
        assert "axrt_engine_failed 1.0" in metrics
        assert "axrt_engine_devices 2.0" in metrics
    # Stop, restructure, resume: a new engine on a rebuilt set serves again.
    with Engine(sets[2], devices=devices(2), num_blocks=64) as engine:
        assert len(engine.generate([[1, 2, 3]], 4, stop_ids=())[0]) == 4
        assert engine.failure is None


def test_a_set_of_cuda_devices_serves_through_nccl_on_the_mock(sets, tmp_path):
    """The engine on two CUDA devices of the mock driver, the set's all-reduces through the
    nccl backend over the mock NCCL (AXRT_NCCL_LIBRARY, set by CTest): the CUDA variants run
    under their CPU implementations, so the tokens are the one-device CPU engine's; a member
    failing mid-serving fails the engine naming it."""
    cuda = [d for d in axrt.devices() if d.type == "cuda"]
    if len(cuda) < 2 or "AXRT_NCCL_LIBRARY" not in os.environ:
        pytest.skip("needs two mock CUDA devices and the mock NCCL (CTest's python.serving_sets "
                    "sets AXRT_MOCK_CUDA_DEVICE_COUNT and AXRT_NCCL_LIBRARY)")
    from axrt.llm.convert import default_fatbin

    if default_fatbin() is None:
        pytest.skip("axrt was built without its CUDA kernels")
    path = tmp_path / "tp2-cuda"
    axrt.llm.convert(DATA / "tiny-llama-tp", path, weights="f32", tensor_parallel=2)
    prompt = [1, 17, 250, 3]
    with Engine(sets[2], devices=devices(2), num_blocks=64) as on_cpu:
        want = on_cpu.generate([prompt], 12, stop_ids=())[0]
    with Engine(path, devices=["cuda:0", "cuda:1"], num_blocks=64) as engine:
        assert engine.group.info()["backend"] == "nccl"
        assert engine.generate([prompt, prompt[:2]], 12, stop_ids=())[0] == want
        running = engine.submit(prompt, 200, stop_ids=())
        assert next(iter(running)).token >= 0
        engine.group.abort(1, "its GPU fell off the bus")
        with pytest.raises(axrt.llm.RequestError, match=r"member 1 \(cuda:1\)"):
            running.result(timeout=60)
        wait_for(lambda: engine.failure is not None, what="the engine to fail")


def test_the_serve_command_serves_a_set_on_its_devices(sets):
    import re
    import signal
    import subprocess
    import sys

    env = dict(os.environ, PYTHONUNBUFFERED="1", AXRT_CPU_DEVICES="4")
    proc = subprocess.Popen([sys.executable, "-m", "axrt.llm", "serve", str(sets[2]),
                             "--devices", "cpu:0,cpu:1", "--port", "0", "--num-blocks", "64",
                             "--log-level", "warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        line = proc.stdout.readline()
        match = re.search(r"serving 'tp2' on http://127\.0\.0\.1:(\d+)/v1", line)
        assert match, line + proc.stderr.read()
        ref = reference()
        prompt = [int(t) for t in ref["prompt0"]]
        with openai.OpenAI(base_url=f"http://127.0.0.1:{match.group(1)}/v1", api_key="none",
                           max_retries=0) as c:
            r = c.completions.create(model="tp2", prompt=prompt, max_tokens=8, temperature=0,
                                     extra_body={"ignore_eos": True})
            assert r.usage.completion_tokens == 8
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    done = subprocess.run([sys.executable, "-m", "axrt.llm", "serve", str(sets[2]), "--devices",
                           "cpu:0", "--port", "0"], capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode != 0 and "one device per shard" in done.stderr
    assert "Traceback" not in done.stderr
