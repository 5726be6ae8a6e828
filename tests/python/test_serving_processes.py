"""A tensor-parallel set served across processes (docs/multi-device.md, "Serving across
processes"): tiny-llama-tp converted into 2 shards, one process each on 127.0.0.1. Greedy
tokens equal transformers', and tokens and logits equal the same set in one process bit for
bit; served with the openai client; a follower killed (-9) during 16 streams ends every
stream with an error, /health says 503 naming it, and a replacement restores the service
without restarting the head.

CTest's python.serving_processes sets AXRT_CPU_DEVICES=2 for the one-process set."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

os.environ.setdefault("AXRT_CPU_DEVICES", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import axrt  # noqa: E402
import axrt.llm  # noqa: E402
import group_worker  # noqa: E402
from serving_support import ids_text, prompts, reference  # noqa: E402

openai = pytest.importorskip("openai")

DATA = Path(__file__).resolve().parent.parent / "llm" / "data"
STEPS = 12


free_port = group_worker.free_port


@pytest.fixture(scope="module", autouse=True)
def transport():
    missing = group_worker.transport_missing()
    if missing:
        pytest.skip(f"no transport between processes in this build: {missing}")
    if len([d for d in axrt.devices() if d.type == "cpu"]) < 2:
        pytest.skip("needs AXRT_CPU_DEVICES=2 before axrt makes its instance")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("set") / "tiny-llama-tp.tp2"
    axrt.llm.convert(DATA / "tiny-llama-tp", path, weights="f32", cuda=False, tensor_parallel=2)
    return path


@pytest.fixture(scope="module")
def one_process(model_dir):
    """Each prompt's greedy tokens and their logits from the set run in this process."""
    out = {}
    with axrt.llm.Engine(model_dir, devices=["cpu:0", "cpu:1"]) as engine:
        for i, prompt in prompts(reference("tiny-llama-tp", "f32")):
            events = [e for e in engine.submit(prompt, STEPS, stop_ids=(), logits=True)
                      if e.token >= 0]
            out[i] = ([e.token for e in events], np.stack([e.logits for e in events]))
        out["tokenizer"] = engine.tokenizer
    return out


HEAD = """
import sys, numpy as np, axrt, axrt.llm
sys.path.insert(0, {tests!r})
from serving_support import prompts, reference
member = axrt.init_group(rendezvous={rdv!r}, rank=0, world_size=2, timeout=60)
with axrt.llm.Engine({model!r}, device="cpu:0", group=member) as engine:
    saved = {{}}
    for i, prompt in prompts(reference("tiny-llama-tp", "f32")):
        events = [e for e in engine.submit(prompt, {steps}, stop_ids=(), logits=True) if e.token >= 0]
        saved[f"tokens{{i}}"] = np.array([e.token for e in events])
        saved[f"logits{{i}}"] = np.stack([e.logits for e in events])
    np.savez({out!r}, **saved)
member.close()
"""

FOLLOWER = """
import axrt, axrt.llm
member = axrt.init_group(rendezvous={rdv!r}, rank=1, world_size=2, timeout=60)
axrt.llm.follow({model!r}, member)
member.close()
print("followed", flush=True)
"""


def test_tokens_and_logits_equal_the_set_in_one_process_bit_for_bit(model_dir, one_process,
                                                                    tmp_path):
    rdv = f"tcp://127.0.0.1:{free_port()}"
    out = tmp_path / "head.npz"
    env = dict(os.environ)
    env.pop("AXRT_CPU_DEVICES", None)
    tests = str(Path(__file__).resolve().parent)
    head = subprocess.Popen([sys.executable, "-c", HEAD.format(tests=tests, rdv=rdv,
                                                               model=str(model_dir),
                                                               steps=STEPS, out=str(out))],
                            stderr=subprocess.PIPE, text=True, env=env)
    follower = subprocess.Popen([sys.executable, "-c", FOLLOWER.format(rdv=rdv,
                                                                       model=str(model_dir))],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert head.wait(timeout=120) == 0, head.stderr.read()
        f_out, f_err = follower.communicate(timeout=60)
        assert follower.returncode == 0 and "followed" in f_out, f_err
    finally:
        for p in (head, follower):
            if p.poll() is None:
                p.kill()
                p.wait()
    ref = reference("tiny-llama-tp", "f32")
    with np.load(out) as got:
        for i, _ in prompts(ref):
            tokens, logits = one_process[i]
            assert got[f"tokens{i}"].tolist() == ref[f"prompt{i}_greedy"][:STEPS].tolist()
            assert got[f"tokens{i}"].tolist() == tokens
            assert got[f"logits{i}"].tobytes() == logits.tobytes(), f"prompt {i}"


def test_follow_and_a_head_refuse_what_they_cannot_run(model_dir):
    with axrt.init_group(rendezvous=f"tcp://127.0.0.1:{free_port()}", rank=0,
                         world_size=1) as alone:
        with pytest.raises(ValueError, match="rank 0, the head"):
            axrt.llm.follow(model_dir, alone)
        with pytest.raises(axrt.llm.UnsupportedModelError, match="set of 2 shards"):
            axrt.llm.Engine(model_dir, device="cpu:0", group=alone)
        with pytest.raises(ValueError, match="group= takes a set's directory"):
            axrt.llm.Engine(model_dir, devices=["cpu:0", "cpu:1"], group=alone)
    with pytest.raises(axrt.InvalidArgumentError):
        axrt._axrt._engine_follow(axrt.load(str(model_dir / "rank1.axe")), axrt.group(["cpu:0"]))


# ---------------------------------------------------------------------------
# Served


def start(args, env):
    return subprocess.Popen([sys.executable, "-m", "axrt.llm", "serve", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def health(url):
    try:
        with urllib.request.urlopen(url + "/health", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_served_across_processes_a_follower_killed_and_replaced(model_dir, one_process):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("AXRT_CPU_DEVICES", None)
    rdv = f"tcp://127.0.0.1:{free_port()}"
    spread = ["--world-size", "2", "--rendezvous", rdv, "--heartbeat-timeout", "5"]
    follower = start([str(model_dir), "--rank", "1", *spread], env)
    head = start([str(model_dir), "--rank", "0", "--port", "0", "--log-level", "warning",
                  *spread], env)
    replacement = None
    try:
        url = None
        for _ in range(4):
            line = head.stdout.readline()
            match = re.search(r"(http://127\.0\.0\.1:\d+)/v1", line)
            if match:
                url = match.group(1)
                break
        assert url, head.stderr.read() if head.poll() is not None else "no URL printed"
        assert health(url) == (200, {"status": "ok"})
        tokenizer = one_process["tokenizer"]
        ref = reference("tiny-llama-tp", "f32")
        client = openai.OpenAI(base_url=url + "/v1", api_key="-", max_retries=0, timeout=60)
        with client:
            assert [m.id for m in client.models.list().data] == ["tiny-llama-tp"]
            for i, prompt in prompts(ref):
                got = client.completions.create(model="tiny-llama-tp", prompt=prompt,
                                                max_tokens=STEPS, temperature=0,
                                                extra_body={"ignore_eos": True})
                assert got.choices[0].text == ids_text(tokenizer, prompt, one_process[i][0])

            # 16 streams running; then member 1 is killed.
            started = threading.Barrier(17, timeout=60)
            outcomes = [None] * 16

            def stream(k):
                try:
                    chunks = client.completions.create(model="tiny-llama-tp", prompt=[1, 2 + k],
                                                       max_tokens=200, temperature=0, stream=True,
                                                       extra_body={"ignore_eos": True})
                    first = True
                    for _ in chunks:
                        if first:
                            started.wait()
                            first = False
                    outcomes[k] = ("finished", None, time.monotonic())
                except Exception as e:  # noqa: BLE001 - what each stream ends with is checked
                    outcomes[k] = ("error", str(e), time.monotonic())

            threads = [threading.Thread(target=stream, args=(k,)) for k in range(16)]
            for t in threads:
                t.start()
            started.wait()
            follower.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            for t in threads:
                t.join(timeout=60)
            assert all(o is not None for o in outcomes)
            # Streams that finished before the kill are fine; the others end with the
            # engine's error naming the member lost, within the heartbeat's bound.
            errors = [o for o in outcomes if o[0] == "error"]
            assert errors, outcomes
            for kind, message, at in errors:
                assert "member 1" in message and "is gone" in message, message
                assert at - killed < 15
            status, body = health(url)
            assert status == 503 and "member 1" in body["reason"], body

            # A replacement for member 1 restores the service; the head never restarted.
            replacement = start([str(model_dir), "--rank", "1", *spread], env)
            wait_for(lambda: health(url)[0] == 200, 60, "the set to serve again")
            prompt = [int(t) for t in ref["prompt0"]]
            again = client.completions.create(model="tiny-llama-tp", prompt=prompt,
                                              max_tokens=STEPS, temperature=0,
                                              extra_body={"ignore_eos": True})
            assert again.choices[0].text == ids_text(tokenizer, prompt, one_process[0][0])
        head.send_signal(signal.SIGTERM)
        assert head.wait(timeout=30) == 0, head.stderr.read()
        # The head closed its engine: the replacement's follow() returned.
        assert replacement.wait(timeout=30) == 0, replacement.stderr.read()
    finally:
        for p in (head, follower, replacement):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
