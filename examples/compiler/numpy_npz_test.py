"""An archive written by numpy itself goes through axrt_mlp_compiler.

usage: numpy_npz_test.py COMPILER RUNNER WORKDIR

np.savez (stored entries, zip64 local headers) must be read and the model it
yields must pass axrt_mlp; np.savez_compressed must be refused with a message
naming the entry. Exits 77 (skipped in CTest) when numpy is not installed.
"""
import os
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("skipped: numpy is not importable by", sys.executable)
    sys.exit(77)

compiler, runner, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(3)
arrays = {
    "fc1.weight": rng.standard_normal((512, 64), dtype=np.float32) * 0.1,
    "fc1.bias": rng.standard_normal(512, dtype=np.float32) * 0.1,
    "fc2.weight": rng.standard_normal((24, 512), dtype=np.float32) * 0.05,
    "fc2.bias": rng.standard_normal(24, dtype=np.float32) * 0.1,
}
stored = os.path.join(work, "weights.npz")
compressed = os.path.join(work, "weights_compressed.npz")
np.savez(stored, **arrays)
np.savez_compressed(compressed, **arrays)


def run(*args):
    result = subprocess.run(args, capture_output=True, text=True)
    print(" ".join(args), "->", result.returncode)
    print(result.stdout + result.stderr)
    return result


model, ref = os.path.join(work, "mlp.axe"), os.path.join(work, "mlp.ref")
if run(compiler, "--weights", stored, "-o", model, "--reference", ref).returncode != 0:
    sys.exit("np.savez's archive was not compiled")
if run(runner, "--iterations", "10", model, ref).returncode != 0:
    sys.exit("axrt_mlp failed on the model from np.savez's archive")

refused = run(compiler, "--weights", compressed, "-o", os.path.join(work, "no.axe"))
if refused.returncode != 1 or "is compressed (deflate, method 8)" not in refused.stderr:
    sys.exit("np.savez_compressed's archive was not refused as expected")
print("OK")
