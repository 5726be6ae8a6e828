"""axrt_logits_process_f32 (docs/llm.md, "Logits processing") against a float64 numpy
reference of each documented formula: the logit bias, the repetition, frequency and presence
penalties, min_p, their order, and then axrt_sample_f32's temperature, top-k and top-p; on
cpu:0 and on cuda:0 of the mock CUDA driver, which runs the CPU kernel of the same name
through the kernel's CUDA variant (the build's fatbin)."""

import numpy as np
import pytest

import axrt
from conftest import kernels_code_object
from axrt.llm.convert import KERNELS as CONTRACTS
from test_llm_kernels import kept_weights, sample_reference, uniforms

PROCESS = CONTRACTS["axrt_logits_process_f32"][0]
SAMPLE = CONTRACTS["axrt_sample_f32"][0]


def cuda_code_object(builder):
    return kernels_code_object(builder, ["axrt_logits_process_f32", "axrt_sample_f32"])


class Rows:
    """A batch of rows of logits with their options, as process_logits takes them."""

    def __init__(self, logits, entries):
        self.logits = np.asarray(logits, np.float32)
        B = self.logits.shape[0]
        self.temperature = np.ones(B, np.float32)
        self.repetition = np.ones(B, np.float32)
        self.frequency = np.zeros(B, np.float32)
        self.presence = np.zeros(B, np.float32)
        self.min_p = np.zeros(B, np.float32)
        self.tokens = np.full((B, entries), -1, np.int32)
        self.counts = np.zeros((B, entries), np.int32)
        self.in_prompt = np.zeros((B, entries), np.int32)
        self.bias = np.zeros((B, entries), np.float32)

    def inputs(self):
        return {"logits": self.logits, "temperature": self.temperature,
                "repetition_penalty": self.repetition, "frequency_penalty": self.frequency,
                "presence_penalty": self.presence, "min_p": self.min_p,
                "entry_tokens": self.tokens, "entry_counts": self.counts,
                "entry_in_prompt": self.in_prompt, "entry_bias": self.bias}


def process_call(rows: Rows, device, stream=None):
    """process_logits over `rows` on `device`: the processed logits (a copy of the input
    the kernel works on in place)."""
    B, V = rows.logits.shape
    E = rows.tokens.shape[1]
    b = axrt.Builder(producer="axrt-tests", producer_version="1")
    k = b.kernel("axrt_logits_process_f32", b.kernel_library("axrt.cpu"), params=PROCESS)
    if device.type == "cuda":
        b.kernel_variant(k, cuda_code_object(b), workgroup_size=256)
    inputs = rows.inputs()
    f = b.function("main", inputs=[(n, a.dtype, a.shape) for n, a in inputs.items()],
                   outputs=[("out", np.float32, (B, V))])
    f.copy(f.input(0), f.output(0), rows.logits.nbytes)
    f.dispatch(k, grid=B, args=[f.output(0), *(f.input(i) for i in range(1, 10)), B, V, E])
    exe = axrt.load(b.to_bytes(), device=device)
    out = exe.main(*inputs.values(), **({"stream": stream} if stream is not None else {}))
    return out if isinstance(out, np.ndarray) else out.numpy()


def process_reference(rows: Rows):
    """The documented arithmetic: per listed token, in float64, bias, then the repetition
    penalty (prompt or generated), then the frequency and presence penalties (generated), one
    rounding to f32; then, when sampling, min_p on the processed row."""
    out = rows.logits.copy()
    for b in range(out.shape[0]):
        rp, fp, pp = (np.float64(rows.repetition[b]), np.float64(rows.frequency[b]),
                      np.float64(rows.presence[b]))
        for e in range(rows.tokens.shape[1]):
            t = rows.tokens[b, e]
            if t < 0:
                continue
            c = int(rows.counts[b, e])
            x = np.float64(out[b, t]) + np.float64(rows.bias[b, e])
            if c > 0 or rows.in_prompt[b, e]:
                x = x / rp if x > 0 else x * rp
            x = x - fp * np.float64(c)
            if c > 0:
                x = x - pp
            out[b, t] = np.float32(x)
        if rows.min_p[b] > 0 and rows.temperature[b] > 0:
            l = np.where(np.isnan(out[b]), -np.inf, out[b])
            top = l.max()
            if np.isfinite(top):
                log_p = 0.0 if rows.min_p[b] >= 1 else np.log(np.float64(rows.min_p[b]))
                threshold = np.float64(top) + np.float64(rows.temperature[b]) * log_p
                out[b, out[b].astype(np.float64) < threshold] = -np.inf
    return out


def random_rows(rng, B, V, E):
    """Rows of every kind: no options, bias only, each penalty, negative and positive logits
    under the repetition penalty, min_p, and all at once."""
    rows = Rows((rng.standard_normal((B, V)) * rng.uniform(0.5, 4, (B, 1))), E)
    for b in range(B):
        kind = b % 6
        if kind == 0:
            continue  # no options: untouched
        n = int(rng.integers(1, E + 1))
        rows.tokens[b, :n] = rng.choice(V, n, replace=False)
        rows.bias[b, :n] = rng.uniform(-100, 100, n) if kind in (1, 5) else 0
        rows.counts[b, :n] = rng.integers(0, 5, n) if kind >= 2 else 0
        rows.in_prompt[b, :n] = rng.integers(0, 2, n) if kind >= 2 else 0
        rows.repetition[b] = rng.choice([0.5, 1.3, 2.0]) if kind in (2, 5) else 1.0
        rows.frequency[b] = rng.uniform(-2, 2) if kind in (3, 5) else 0.0
        rows.presence[b] = rng.uniform(-2, 2) if kind in (3, 5) else 0.0
        rows.min_p[b] = rng.choice([0.05, 0.3, 0.9]) if kind in (4, 5) else 0.0
        rows.temperature[b] = rng.choice([0.5, 1.0, 1.7])
    return rows


def bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


def test_rows_match_the_float64_reference(device):
    rng = np.random.default_rng(21)
    rows = random_rows(rng, 36, 300, 24)
    np.testing.assert_array_equal(bits(process_call(rows, device)), bits(process_reference(rows)))


def test_rows_without_options_are_untouched_bit_for_bit(device):
    rng = np.random.default_rng(22)
    rows = random_rows(rng, 12, 257, 8)
    rows.logits[0, :4] = [np.nan, -0.0, np.inf, -np.inf]
    rows.logits[6, 10] = np.float32(np.nan) * -1
    rows.temperature[[0, 6]] = [0.0, 1.0]  # neither with min_p: left alone
    out = process_call(rows, device)
    for b in (0, 6):
        np.testing.assert_array_equal(bits(out[b]), bits(rows.logits[b]))
    # Only the listed tokens (and min_p's masked ones) change.
    for b in range(rows.logits.shape[0]):
        changed = set(np.flatnonzero(bits(out[b]) != bits(rows.logits[b])).tolist())
        listed = set(rows.tokens[b][rows.tokens[b] >= 0].tolist())
        masked = set(np.flatnonzero(np.isneginf(out[b]) & ~np.isneginf(rows.logits[b])).tolist())
        assert changed <= listed | masked, b


def test_each_formula_on_its_own(device):
    V = 8
    logits = np.array([2.0, -2.0, 1.0, 0.5, -1.0, 3.0, 0.0, -0.5], np.float32)
    rows = Rows(np.tile(logits, (5, 1)), 4)
    # 0: bias. 1: repetition 2 on a prompt token and a generated one, positive and
    # negative. 2: frequency 0.5 with counts 3 and 1. 3: presence 1.5. 4: min_p 0.5 at T = 1.
    rows.tokens[0, :2] = [1, 6]
    rows.bias[0, :2] = [10.0, -3.0]
    rows.tokens[1, :3] = [0, 1, 2]
    rows.in_prompt[1, :3] = [1, 0, 0]
    rows.counts[1, :3] = [0, 2, 0]
    rows.repetition[1] = 2.0
    rows.tokens[2, :2] = [3, 5]
    rows.counts[2, :2] = [3, 1]
    rows.frequency[2] = 0.5
    rows.tokens[3, :2] = [4, 7]
    rows.counts[3, :2] = [1, 0]
    rows.in_prompt[3, :2] = [0, 1]
    rows.presence[3] = 1.5
    rows.min_p[4] = 0.5
    out = process_call(rows, device)
    want = np.tile(logits, (5, 1))
    want[0, [1, 6]] = [8.0, -3.0]
    want[1, [0, 1]] = [1.0, -4.0]  # token 2: neither in the prompt nor generated
    want[2, [3, 5]] = [-1.0, 2.5]
    want[3, 4] = -2.5  # token 7: in the prompt only, no presence
    # min_p 0.5 at T = 1: keep l >= 3 + ln 0.5 = 2.307.
    want[4] = np.where(logits >= 3 + np.log(0.5), logits, -np.inf)
    np.testing.assert_array_equal(out, want)
    assert np.isfinite(out[4]).sum() == 1


def test_min_p_needs_sampling_and_1_keeps_the_largest(device):
    logits = np.array([[1.0, 4.0, 4.0, -2.0, 3.999]] * 3, np.float32)
    rows = Rows(logits, 1)
    rows.min_p[:] = [1.0, 1.0, 0.5]
    rows.temperature[:] = [1.0, 0.0, np.nan]  # greedy and NaN: no mask
    out = process_call(rows, device)
    np.testing.assert_array_equal(out[0], [-np.inf, 4.0, 4.0, -np.inf, -np.inf])
    np.testing.assert_array_equal(out[1:], logits[1:])


def test_processing_then_sampling_matches_the_reference(device):
    """The engine's order: process_logits, then axrt_sample_f32's temperature, top-k, top-p
    and draw, against the reference of both (greedy rows take the processed maximum)."""
    rng = np.random.default_rng(23)
    B, V, E = 240, 129, 12
    rows = random_rows(rng, B, V, E)
    rows.temperature[::5] = 0.0
    top_k = rng.choice([0, 1, 5, 40], B).astype(np.int32)
    top_p = rng.choice([1.0, 0.9, 0.5], B).astype(np.float32)
    seeds = rng.integers(0, 2**64, B, dtype=np.uint64)
    positions = rng.integers(0, 5000, B).astype(np.int32)
    processed = process_call(rows, device)
    b = axrt.Builder(producer="axrt-tests", producer_version="1")
    k = b.kernel("axrt_sample_f32", b.kernel_library("axrt.cpu"), params=SAMPLE)
    if device.type == "cuda":
        b.kernel_variant(k, cuda_code_object(b), workgroup_size=256)
    inputs = {"logits": processed, "temperature": rows.temperature, "top_k": top_k,
              "top_p": top_p, "seeds": seeds, "positions": positions}
    f = b.function("main", inputs=[(n, a.dtype, a.shape) for n, a in inputs.items()],
                   outputs=[("tokens", np.int32, (B,))])
    f.dispatch(k, grid=B, args=[*(f.input(i) for i in range(6)), f.output(0), B, V])
    tokens = axrt.load(b.to_bytes(), device=device).main(*inputs.values())
    tokens = tokens if isinstance(tokens, np.ndarray) else tokens.numpy()
    want_logits = process_reference(rows)
    u = uniforms(seeds, positions)
    want = [sample_reference(want_logits[i], rows.temperature[i], top_k[i], top_p[i], u[i])
            for i in range(B)]
    np.testing.assert_array_equal(tokens, want)
    # Every sampled token is one min_p kept.
    for i in np.flatnonzero((rows.min_p > 0) & (rows.temperature > 0)):
        kept = kept_weights(want_logits[i], rows.temperature[i], top_k[i], top_p[i])
        if not isinstance(kept, int):
            assert np.isfinite(want_logits[i, tokens[i]]) and kept[tokens[i]] > 0


@pytest.mark.parametrize("token, count, match", [(300, 0, "token 300 is outside"),
                                                 (-2, 0, "token -2 is outside"),
                                                 (4, -1, "count -1 is negative")])
def test_bad_entries_are_refused(token, count, match):
    rows = Rows(np.zeros((2, 300), np.float32), 3)
    rows.tokens[1] = [7, token, -1]
    rows.counts[1, 1] = count
    rows.bias[1, 0] = 5.0
    stream = axrt.Stream(device="cpu:0")
    with pytest.raises(axrt.InvalidArgumentError, match=match):
        process_call(rows, axrt.device("cpu:0"), stream=stream)
        stream.synchronize()
