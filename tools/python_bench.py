"""The Python package's costs (GPU machine), for docs/PERF.md, 'The Python layer adds about 14 us
a call':

1. per-call host time of gemmtune.linear, gemmtune.matmul and torch.ops.gemmtune.linear over a
   direct C API call (ctypes, arguments prepared once: the floor for any Python caller), and
   F.linear's, on a problem small enough that the GPU never holds the caller up;
2. time per call of gemmtune.linear and F.linear (cuBLAS) on the GEMMs of
   examples/python/record_then_tune.py's block, back to back, and their ratio.

    python3 tools/python_bench.py [--json FILE]
"""
import argparse
import ctypes
import json
import pathlib
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import gemmtune
from gemmtune import _library


def host_us_per_call(call, calls=20000, batch=400):
    """Host time of `calls` calls in batches short enough that the launch queue never fills
    (the GPU waits for the caller, not the other way round); the median batch, per call."""
    for _ in range(batch):
        call()
    torch.cuda.synchronize()
    per_batch = []
    for _ in range(calls // batch):
        start = time.perf_counter()
        for _ in range(batch):
            call()
        per_batch.append((time.perf_counter() - start) / batch * 1e6)
        torch.cuda.synchronize()
    return statistics.median(per_batch)


def direct_c_api(x, w, out):
    """gemmtune_gemm_on_device with every argument prepared once: y = x @ w.T as 'tn'."""
    lib = _library.library()
    tokens, features = x.shape
    outputs = w.shape[0]
    args = (x.device.index, _library.type_code("bf16"), 1, 0, outputs, tokens, features,
            ctypes.c_float(1.0), ctypes.c_void_p(w.data_ptr()), features,
            ctypes.c_void_p(x.data_ptr()), features, ctypes.c_float(0.0),
            ctypes.c_void_p(out.data_ptr()), outputs,
            ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    function = lib.gemmtune_gemm_on_device
    return lambda: function(*args)


def overhead():
    x = torch.randn(8, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(8, 256, device="cuda", dtype=torch.bfloat16)
    wt = w.t()
    calls = {
        "C API through ctypes, prepared": direct_c_api(x, w, out),
        "gemmtune.linear(x, w)": lambda: gemmtune.linear(x, w),
        "gemmtune.matmul(x, w.t())": lambda: gemmtune.matmul(x, wt),
        "gemmtune.matmul(x, w.t(), out=out)": lambda: gemmtune.matmul(x, wt, out=out),
        "F.linear(x, w) (cuBLAS)": lambda: F.linear(x, w),
    }
    if gemmtune.torch_operators:
        calls["torch.ops.gemmtune.linear(x, w)"] = lambda: torch.ops.gemmtune.linear(x, w)
    with torch.inference_mode():
        return {name: host_us_per_call(call) for name, call in calls.items()}


def us_per_call(call, repeats=50):
    """Back-to-back calls timed with CUDA events: per call, as a model sees it."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        call()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1e3 / repeats


def model_shapes(prompt_tokens=256):
    """(tokens, out, in) of the block's nn.Linear layers, prefill and decode."""
    weights = [(6144, 2048), (2048, 2048), (5632, 2048), (2048, 5632)]
    return [(t, o, i) for t in (prompt_tokens, 1) for o, i in weights]


def ratios(rounds=7):
    rows = []
    with torch.inference_mode():
        for tokens, outputs, features in model_shapes():
            x = torch.randn(tokens, features, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(outputs, features, device="cuda", dtype=torch.bfloat16)
            ours, theirs = [], []
            for _ in range(3):  # warm-up: kernels loaded, clocks up
                us_per_call(lambda: gemmtune.linear(x, w)), us_per_call(lambda: F.linear(x, w))
            for _ in range(rounds):  # interleaved, so both see the same clocks
                ours.append(us_per_call(lambda: gemmtune.linear(x, w)))
                theirs.append(us_per_call(lambda: F.linear(x, w)))
            ours_us, theirs_us = statistics.median(ours), statistics.median(theirs)
            flops = 2.0 * tokens * outputs * features
            s = gemmtune.select_linear(x, w)
            rows.append({"problem": gemmtune.problem_linear(x, w).shape_line(),
                         "selection": s.source, "kernel": s.kernel,
                         "gemmtune_us": ours_us, "f_linear_us": theirs_us,
                         "gemmtune_tflops": flops / ours_us / 1e6,
                         "f_linear_tflops": flops / theirs_us / 1e6,
                         "ratio": theirs_us / ours_us})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args()
    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
               "python": sys.version.split()[0], "overhead_us": overhead(), "model": ratios()}
    base = results["overhead_us"]["C API through ctypes, prepared"]
    print(f"per-call host time on {results['gpu']} (bf16 8x256x256, median of batches):")
    for name, us in results["overhead_us"].items():
        print(f"  {name:40s} {us:7.2f} us   (+{us - base:5.2f} us over the C API)")
    print("the model's GEMMs, back-to-back calls (ratio = F.linear time / gemmtune time):")
    print(f"  {'problem (M N K)':24s} {'selection':9s} {'gemmtune us':>11s} {'F.linear us':>11s} "
          f"{'TFLOP/s':>8s} {'F.linear':>8s} {'ratio':>6s}")
    for r in results["model"]:
        print(f"  {r['problem']:24s} {r['selection']:9s} {r['gemmtune_us']:11.1f} "
              f"{r['f_linear_us']:11.1f} {r['gemmtune_tflops']:8.1f} {r['f_linear_tflops']:8.1f} "
              f"{r['ratio']:6.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
