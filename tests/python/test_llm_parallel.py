"""Tensor-parallel models (docs/multi-device.md): tiny Llama checkpoints converted
into sets of 2 and 4 shards and served by the engine on as many CPU devices,
against transformers' outputs (tests/llm/data) and the same model on one device.

Needs AXRT_CPU_DEVICES=4 in the environment before axrt makes its instance;
CTest's python.llm_parallel sets it."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import axrt
import axrt.llm
from axrt.llm import ParallelModel, UnsupportedModelError
from serving_support import prompts, reference

DATA = Path(__file__).resolve().parent.parent / "llm" / "data"
# Logits agree with transformers within this fraction of the largest |logit|
# of the same position, as on one device (test_llm.py); the sums over the
# ranks only reorder f32 additions.
F32_TOLERANCE = 1e-4
# Against the same model on one device: the same bound, both being within
# F32_TOLERANCE of transformers; measured, the two differ by far less.
ONE_DEVICE_TOLERANCE = 1e-4

CPU = [d for d in axrt.devices() if d.type == "cpu"]
pytestmark = pytest.mark.skipif(
    len(CPU) < 4, reason=f"needs 4 CPU devices (AXRT_CPU_DEVICES=4 set before axrt makes its "
                         f"instance), has {len(CPU)}")


def devices(n):
    return [f"cpu:{i}" for i in range(n)]




def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - want)) / np.max(np.abs(want)))


def max_abs(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - want)))


def engine_logits(engine, prompt, count):
    """The greedy tokens and, for each, the logits it was chosen from (the first
    after the prompt), through `engine`."""
    request = engine.submit(prompt, count, stop_ids=(), logits=True)
    events = [e for e in request if e.token >= 0]
    return [e.token for e in events], [e.logits for e in events]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Converts each (model, weights, ranks) once; ranks 1 is the single file."""
    out = tmp_path_factory.mktemp("models")
    cache = {}

    def get(model: str, weights: str = "f32", ranks: int = 1) -> Path:
        key = (model, weights, ranks)
        if key not in cache:
            path = out / (f"{model}.{weights}.axe" if ranks == 1 else f"{model}.{weights}.tp{ranks}")
            axrt.llm.convert(DATA / model, path, weights=weights, cuda=False,
                             tensor_parallel=ranks)
            cache[key] = path
        return cache[key]

    return get


@pytest.fixture
def report(capsys):
    """Prints a line of what a test measured, past pytest's capture."""
    def say(line: str) -> None:
        with capsys.disabled():
            print("\n" + line, end="")

    return say


@pytest.mark.parametrize("model, ranks", [("tiny-llama-tp", 2), ("tiny-llama-tp", 4),
                                          ("tiny-llama", 2)])
def test_greedy_tokens_and_logits_match_transformers_and_one_device(converted, report, model,
                                                                     ranks):
    ref = reference(model, "f32")
    one = axrt.llm.Engine(converted(model))
    with one, axrt.llm.load(converted(model, ranks=ranks), devices=devices(ranks)) as tp:
        assert isinstance(tp, ParallelModel) and tp.size == ranks
        assert [str(d.id) for d in tp.devices] == devices(ranks)
        assert isinstance(tp.group, axrt.Group) and tp.group.size == ranks
        worst = worst_one = 0.0
        for i, prompt in prompts(ref):
            tokens = tp.generate(prompt, 32, stop_ids=())
            assert tokens == ref[f"prompt{i}_greedy"].tolist(), f"prompt {i}"
            # Every step's logits: after the prompt, then after each token.
            got, rows = engine_logits(tp.engine, prompt, 32)
            alone, alone_rows = engine_logits(one, prompt, 32)
            assert got == alone == tokens, f"prompt {i}"
            for step, (row, alone_row) in enumerate(zip(rows, alone_rows)):
                want = ref[f"prompt{i}_greedy_logits"][step]
                err = relative_error(row, want)
                assert err <= F32_TOLERANCE, f"prompt {i} step {step}: off by {err:.2e}"
                assert relative_error(row, alone_row) <= ONE_DEVICE_TOLERANCE
                worst = max(worst, max_abs(row, want))
                worst_one = max(worst_one, max_abs(row, alone_row))
    report(f"{model} f32 on {ranks} ranks: greedy tokens equal; logits within {worst:.2e} "
           f"(max abs) of transformers, {worst_one:.2e} of one device")


@pytest.mark.parametrize("ranks", [2, 4])
def test_every_position_and_chunked_prefill(converted, ranks):
    """The logits after every prefix of a prompt, through a session of the set
    (each call a request of the engine, the earlier prefixes supplied by the
    prefix cache), and the whole prompt prefilled in chunks of 5 and 16 tokens."""
    ref = reference("tiny-llama-tp", "f32")
    i, prompt = next(p for p in prompts(ref) if len(p[1]) > 20)
    want = ref[f"prompt{i}_logits"]
    path = converted("tiny-llama-tp", ranks=ranks)
    with axrt.llm.load(path, devices=devices(ranks)) as tp, tp.session() as seq:
        rows = [seq.prefill(prompt[:1])] + [seq.decode(t) for t in prompt[1:]]
        for position, row in enumerate(rows):
            err = relative_error(row, want[position])
            assert err <= F32_TOLERANCE, f"position {position}: logits off by {err:.2e}"
        assert tp.engine.stats()["cached_prompt_tokens"] > 0
    for chunk in (5, 16):
        with axrt.llm.Engine(path, devices=devices(ranks), max_step_tokens=chunk) as engine:
            _, rows = engine_logits(engine, prompt, 1)
            assert relative_error(rows[0], want[-1]) <= F32_TOLERANCE, f"chunks of {chunk}"


@pytest.mark.parametrize("weights, ranks", [("int8", 2), ("int8", 4), ("fp8", 2), ("int4", 2),
                                            ("bf16", 4)])
def test_quantized_shards_are_the_one_device_weights(converted, report, weights, ranks):
    """A quantized set holds exactly the codes and scales of the one-device file
    (int8's and fp8's row-parallel shards keep each whole row's scale; int4's split at
    group boundaries), so it matches transformers on the dequantized weights
    within the f32 bound, and the one-device model's tokens."""
    ref = reference("tiny-llama-tp", weights)
    one = axrt.llm.load(converted("tiny-llama-tp", weights))
    worst = 0.0
    with axrt.llm.load(converted("tiny-llama-tp", weights, ranks),
                       devices=devices(ranks)) as tp:
        for i, prompt in prompts(ref):
            tokens, rows = engine_logits(tp.engine, prompt, 32)
            assert tokens == ref[f"prompt{i}_greedy"].tolist(), f"prompt {i}"
            assert tokens == one.generate(prompt, 32, stop_ids=()), f"prompt {i}"
            for step, row in enumerate(rows):
                want = ref[f"prompt{i}_greedy_logits"][step]
                err = relative_error(row, want)
                assert err <= F32_TOLERANCE, f"prompt {i} step {step}: off by {err:.2e}"
                worst = max(worst, max_abs(row, want))
    report(f"tiny-llama-tp {weights} on {ranks} ranks: greedy tokens equal; logits within "
           f"{worst:.2e} (max abs) of transformers on the dequantized weights")


def test_int8_activations_match_the_one_device_model(converted, report, tmp_path):
    """int4 weights with int8 activations: each projection quantizes its input
    per group of 128, and the shards split inputs at group boundaries, so a
    shard quantizes exactly what one device does. The reference is the
    one-device model (test_llm.py bounds it against transformers)."""
    ref = reference("tiny-llama-tp", "int4")
    one_path, tp_path = tmp_path / "one.axe", tmp_path / "tp2"
    for path, ranks in ((one_path, 1), (tp_path, 2)):
        axrt.llm.convert(DATA / "tiny-llama-tp", path, weights="int4", activations="int8",
                         cuda=False, tensor_parallel=ranks)
    worst = 0.0
    with axrt.llm.Engine(one_path) as one, \
            axrt.llm.Engine(tp_path, devices=devices(2)) as tp:
        assert tp.config.activations == "int8"
        for i, prompt in prompts(ref):
            tokens, rows = engine_logits(tp, prompt, 9)
            alone, alone_rows = engine_logits(one, prompt, 9)
            assert tokens == alone
            for row, alone_row in zip(rows, alone_rows):
                assert relative_error(row, alone_row) <= ONE_DEVICE_TOLERANCE
                worst = max(worst, max_abs(row, alone_row))
    report(f"tiny-llama-tp int4 + int8 activations on 2 ranks: greedy tokens equal to one "
           f"device's; logits within {worst:.2e} (max abs) of it")


def test_split_attention_in_each_shard(report, tmp_path):
    """Split attention (docs/kernels.md, "Split attention"): each shard splits the contexts of
    its own query heads; transformers' greedy tokens and logits within the f32 bound."""
    ref = reference("tiny-llama-tp", "f32")
    path = tmp_path / "split.tp2"
    axrt.llm.convert(DATA / "tiny-llama-tp", path, cuda=False, tensor_parallel=2,
                     split_attention=True, attention_splits=4)
    worst = 0.0
    with axrt.llm.Engine(path, devices=devices(2)) as tp:
        assert tp.config.split_attention and tp.config.attention_splits == 4
        for i, prompt in prompts(ref):
            tokens, rows = engine_logits(tp, prompt, 32)
            assert tokens == ref[f"prompt{i}_greedy"].tolist(), f"prompt {i}"
            for step, row in enumerate(rows):
                want = ref[f"prompt{i}_greedy_logits"][step]
                err = relative_error(row, want)
                assert err <= F32_TOLERANCE, f"prompt {i} step {step}: off by {err:.2e}"
                worst = max(worst, max_abs(row, want))
    report(f"tiny-llama-tp f32, split attention in 4 chunks, on 2 ranks: greedy tokens equal; "
           f"logits within {worst:.2e} (max abs) of transformers")


def test_sampling_and_the_kv_cache_shards(converted):
    path = converted("tiny-llama-tp", ranks=2)
    one = axrt.llm.load(converted("tiny-llama-tp"))
    with axrt.llm.load(path, devices=devices(2), num_blocks=8) as tp:
        prompt = [1, 17, 250, 3]
        a = tp.generate(prompt, 24, temperature=1.0, top_p=0.95, seed=11, stop_ids=())
        assert a == tp.generate(prompt, 24, temperature=1.0, top_p=0.95, seed=11, stop_ids=())
        assert a == one.generate(prompt, 24, temperature=1.0, top_p=0.95, seed=11, stop_ids=())
        assert list(tp.stream(prompt, 24, temperature=1.0, top_p=0.95, seed=11,
                              stop_ids=())) == a
        assert tp.generate(prompt, 24, stop_ids=[a[0]], temperature=1.0, top_p=0.95,
                           seed=11) == a[:1]
        assert tp.generate(prompt, 0) == []
        # The one pool of 8 blocks of 16 tokens: 128 tokens at most.
        assert tp.engine.stats()["kv_blocks_total"] == 8
        with pytest.raises(ValueError, match="outside the vocabulary"):
            tp.generate([1, 5000], 4)
        assert tp.tokenizer is not None
    with pytest.raises(RuntimeError, match="closed"):
        tp.generate(prompt, 2)


def test_each_step_is_two_all_reductions_per_layer(converted):
    """The layers' partial sums go through the device group: two all-reductions
    per layer and step, queued; the host reads only the tokens."""
    with axrt.llm.load(converted("tiny-llama-tp", ranks=2), devices=devices(2)) as tp:
        layers = tp.config.num_layers
        before = tp.group.info()["collectives"]
        tokens = tp.generate([1, 17, 250, 3], 5, stop_ids=())
        assert len(tokens) == 5
        # One prefill and four decode steps.
        assert tp.group.info()["collectives"] - before == 5 * 2 * layers


def test_an_aborted_group_fails_the_model_naming_it(converted):
    with axrt.llm.load(converted("tiny-llama-tp", ranks=2), devices=devices(2)) as tp:
        tp.group.abort(1, "taken down by the test")
        with pytest.raises(axrt.llm.RequestError,
                           match=r"axrt.llm.*member 1 \(cpu:1\) failed: taken down by the test"):
            tp.generate([1, 17, 250, 3], 4, stop_ids=())
        # The engine takes no more requests.
        with pytest.raises(axrt.FailedPreconditionError, match="has failed"):
            tp.generate([1, 17, 250, 3], 4, stop_ids=())
    # Stop, restructure, resume: a new set on the same devices runs.
    with axrt.llm.load(converted("tiny-llama-tp", ranks=2), devices=devices(2)) as tp:
        assert len(tp.generate([1, 17, 250, 3], 4, stop_ids=())) == 4


def test_the_shards_say_what_they_hold(converted):
    path = converted("tiny-llama-tp", ranks=4)
    assert sorted(p.name for p in path.iterdir()) == [f"rank{r}.axe" for r in range(4)]
    infos = []
    for rank in range(4):
        exe = axrt.load(path / f"rank{rank}.axe")
        info = json.loads(exe.metadata["axrt.llm.shard"])
        infos.append(info)
        assert info["rank"] == rank and info["size"] == 4 and info["head_rank"] == 0
        assert info["heads"] == [2 * rank, 2 * rank + 2]
        assert info["kv_heads"] == [rank, rank + 1]
        assert info["intermediate"] == [128 * rank, 128 * rank + 128]
        # The serving contract: `step` on every rank, its two all-reduces per
        # layer inside it; the logits, `sample` and `process_logits` on the head rank.
        assert set(exe.functions) == ({"step", "sample", "process_logits"} if rank == 0
                                      else {"step"})
        assert ("axrt.llm.tokenizer" in exe.metadata) == (rank == 0)
        assert exe["step"].inputs[-1]["shape"] == (2, 2, "NB", 1, 16, 32)
        assert len(exe["step"].outputs) == (1 if rank == 0 else 0)
    assert len({i["set_id"] for i in infos}) == 1


def test_indivisible_splits_are_refused_before_writing(tmp_path):
    out = tmp_path / "set"
    with pytest.raises(UnsupportedModelError,
                       match="num_key_value_heads 2 is not a multiple of 4"):
        axrt.llm.convert(DATA / "tiny-llama", out, tensor_parallel=4, cuda=False)
    with pytest.raises(UnsupportedModelError,
                       match="num_key_value_heads 1 is not a multiple of 2"):
        axrt.llm.convert(DATA / "tiny-llama3", out, tensor_parallel=2, cuda=False)
    # int4 keeps the whole projection's groups of 128 inputs: o_proj's 256
    # inputs split 4 ways are 64 per shard.
    with pytest.raises(UnsupportedModelError,
                       match=r"o_proj is \[256, 64\] in each of 4 tensor-parallel shards"):
        axrt.llm.convert(DATA / "tiny-llama-tp", out, weights="int4", tensor_parallel=4,
                         cuda=False)
    with pytest.raises(ValueError, match="tensor_parallel must be at least 1"):
        axrt.llm.convert(DATA / "tiny-llama-tp", out, tensor_parallel=0, cuda=False)
    assert not out.exists()
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(UnsupportedModelError, match="is a file"):
        axrt.llm.convert(DATA / "tiny-llama-tp", tmp_path / "file", tensor_parallel=2,
                         cuda=False)


def test_bad_shard_sets_are_refused_by_name(converted, tmp_path):
    two = converted("tiny-llama-tp", ranks=2)
    rank0, rank1 = two / "rank0.axe", two / "rank1.axe"
    # Another conversion of the same model: its shards are another set.
    other = tmp_path / "other"
    axrt.llm.convert(DATA / "tiny-llama-tp", other, tensor_parallel=2, cuda=False)
    with pytest.raises(ValueError, match="set of 2 shards; 3 devices were given"):
        axrt.llm.load(two, devices=devices(3))
    with pytest.raises(ValueError, match="set of 2 shards; 1 devices were given"):
        axrt.llm.load(two, devices=["cpu:0"])
    with pytest.raises(ValueError, match="cpu:1 is given twice"):
        axrt.llm.load(two, devices=["cpu:1", "cpu:1"])
    with pytest.raises(UnsupportedModelError, match="rank 1 of its set, given as rank 0"):
        axrt.llm.load([rank1, rank0], devices=devices(2))
    with pytest.raises(UnsupportedModelError, match="another set"):
        axrt.llm.load([rank0, other / "rank1.axe"], devices=devices(2))
    with pytest.raises(UnsupportedModelError, match="another set"):
        axrt.llm.load([rank0, converted("tiny-llama-tp", ranks=4) / "rank1.axe"],
                      devices=devices(2))
    with pytest.raises(UnsupportedModelError, match="set of 2 shards; 1 files were given"):
        axrt.llm.load([rank0], devices=devices(2))
    with pytest.raises(UnsupportedModelError, match="not a shard"):
        axrt.llm.load([rank0, converted("tiny-llama-tp")], devices=devices(2))
    # A directory missing a rank, or holding one beyond its set.
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(rank0, partial)
    with pytest.raises(UnsupportedModelError, match="lacks rank1.axe"):
        axrt.llm.load(partial, devices=devices(2))
    shutil.copy(rank1, partial)
    shutil.copy(rank1, partial / "rank2.axe")
    with pytest.raises(UnsupportedModelError, match="holds rank2.axe, beyond its set of 2"):
        axrt.llm.load(partial, devices=devices(2))
    (partial / "rank0.axe").unlink()
    with pytest.raises(UnsupportedModelError, match="holds no rank0.axe"):
        axrt.llm.load(partial, devices=devices(2))
    # One shard or a set's directory without devices=.
    with pytest.raises(UnsupportedModelError, match="rank 1 of a 2-way tensor-parallel set"):
        axrt.llm.load(rank1)
    with pytest.raises(UnsupportedModelError, match="is a directory"):
        axrt.llm.load(two)
    with pytest.raises(UnsupportedModelError, match="rank 0 of a 2-way tensor-parallel set"):
        axrt.llm.Engine(rank0)
    with pytest.raises(ValueError, match="not both"):
        axrt.llm.load(two, "cpu:0", devices=devices(2))
    # A single-file model on a one-device list is the one-device Model.
    assert isinstance(axrt.llm.load(converted("tiny-llama-tp"), devices=["cpu:1"]),
                      axrt.llm.Model)
    # The set still loads after all that.
    with axrt.llm.load(two, devices=devices(2)) as tp:
        assert tp.generate([1, 2, 3], 2, stop_ids=()) == tp.generate([1, 2, 3], 2, stop_ids=())


def test_a_smaller_set_replaces_a_larger_one_in_its_directory(tmp_path):
    out = tmp_path / "set"
    axrt.llm.convert(DATA / "tiny-llama-tp", out, tensor_parallel=4, cuda=False)
    axrt.llm.convert(DATA / "tiny-llama-tp", out, tensor_parallel=2, cuda=False)
    assert sorted(p.name for p in out.iterdir()) == ["rank0.axe", "rank1.axe"]
    with axrt.llm.load(out, devices=devices(2)) as tp:
        assert tp.size == 2


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "axrt.llm", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_command_line_convert_and_generate(tmp_path):
    out = tmp_path / "set"
    done = _cli("convert", DATA / "tiny-llama-tp", out, "--tensor-parallel", 2, "--no-cuda")
    assert done.returncode == 0, done.stderr
    assert "2 tensor-parallel shards" in done.stdout
    ref = reference("tiny-llama-tp", "f32")
    prompt = ",".join(str(t) for t in ref["prompt0"])
    done = _cli("generate", out, "--devices", "cpu:0,cpu:1", "--prompt-ids", prompt,
                "--max-new-tokens", 16)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(t) for t in ref["prompt0_greedy"][:16]]
    done = _cli("generate", out, "--devices", "cpu:0", "--prompt-ids", prompt)
    assert done.returncode == 1 and "one device per shard" in done.stderr
    assert "Traceback" not in done.stderr
    done = _cli("convert", DATA / "tiny-llama", tmp_path / "x", "--tensor-parallel", 4)
    assert done.returncode == 1 and "not a multiple of 4" in done.stderr
