"""The Python package's costs (GPU machine), for docs/PERF.md, 'A planned Python call costs less
host time than F.linear':

1. per-call host time of gemmtune.linear, gemmtune.matmul and torch.ops.gemmtune.linear over a
   direct C API call (ctypes, arguments prepared once: the floor for any Python caller), and
   F.linear's, on a problem small enough that the GPU never holds the caller up;
2. time per call of gemmtune.linear and F.linear (cuBLAS) on the GEMMs of
   examples/python/record_then_tune.py's block, back to back, and their ratio (the geometric
   means of its prefill and of its decode GEMMs);
3. with --breakdown, where a planned gemmtune.linear call's host time goes: each step of its
   path timed alone (the stream's handle, the result's allocation, the data_ptr reads, the key,
   the lookup, the C call with its arguments ready), on bf16 16x4096x4096 and 8x256x256
   (tokens x in x out), beside the whole calls (gemmtune.linear, torch.ops.gemmtune.linear,
   F.linear, an nn.Linear patched by gemmtune.patch and one not).

    python3 tools/python_bench.py [--breakdown] [--json FILE]
"""
import argparse
import ctypes
import json
import math
import pathlib
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import gemmtune
from gemmtune import _library, _torch


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


def overhead(tokens, features, outputs, rounds=9):
    """Host time per call of each call on bf16 x (tokens, features) and w (outputs, features):
    rounds of every call in turn (clocks drift by more than the differences), the median round
    and the spread, and each call's ratio to F.linear's time in the same round."""
    x = torch.randn(tokens, features, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(outputs, features, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(tokens, outputs, device="cuda", dtype=torch.bfloat16)
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
    if gemmtune.cpp_linear_operator() is not None:  # tools/build_torch_op.py built it
        calls["torch.ops.gemmtune_cpp.linear(x, w)"] = lambda: torch.ops.gemmtune_cpp.linear(x, w)
    calls.update(layer_calls(x, w))
    times = {name: [] for name in calls}
    with torch.inference_mode():
        for _ in range(rounds):
            for name, call in calls.items():
                times[name].append(host_us_per_call(call, calls=4000))
    reference = times["F.linear(x, w) (cuBLAS)"]
    return {name: {"us": statistics.median(us), "min_us": min(us), "max_us": max(us),
                   "vs_f_linear": statistics.median(t / f for t, f in zip(us, reference)),
                   "vs_f_linear_range": [min(t / f for t, f in zip(us, reference)),
                                         max(t / f for t, f in zip(us, reference))]}
            for name, us in times.items()}


OVERHEAD_SHAPES = [(8, 256, 256), (16, 4096, 4096)]  # tokens, in, out


def print_overhead(results):
    for shape, calls in results.items():
        print(f"per-call host time on {torch.cuda.get_device_name()} (bf16 {shape}, tokens x in x "
              "out; median of rounds in turns [spread]; ratio to F.linear's time, same round):")
        for name, r in calls.items():
            low, high = r["vs_f_linear_range"]
            print(f"  {name:40s} {r['us']:7.2f} us [{r['min_us']:6.2f}-{r['max_us']:6.2f}]  "
                  f"x{r['vs_f_linear']:.3f} F.linear [{low:.3f}-{high:.3f}]")


def layer_calls(x, w):
    """An nn.Linear (bias=False) of weight w, patched by gemmtune.patch and not: the calls."""
    torch_layer = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, device=w.device,
                                  dtype=w.dtype)
    patched_layer = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, device=w.device,
                                    dtype=w.dtype)
    with torch.no_grad():
        torch_layer.weight.copy_(w)
        patched_layer.weight.copy_(w)
    gemmtune.patch(patched_layer)  # kept: the layer lives as long as the lambda
    return {"nn.Linear(x) patched (gemmtune.patch)": lambda: patched_layer(x),
            "nn.Linear(x) (torch)": lambda: torch_layer(x)}


def breakdown(tokens, features, outputs):
    """Host time per call of each step of a planned gemmtune.linear(x, w) on bf16 x (tokens,
    features) and w (outputs, features), and of the whole calls; 'the rest' is the whole call's
    time less its steps' (Python frames, attribute reads, checks)."""
    x = torch.randn(tokens, features, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(outputs, features, device="cuda", dtype=torch.bfloat16)
    gemmtune.linear(x, w)  # checked and planned
    key = _torch._linear_key(x, w, None, None, "identity")
    planned = _torch._PLANS[key]
    shape, dtype, device, index = (planned.shape, planned.dtype, planned.torch_device,
                                   planned.device)
    y = torch.empty(shape, dtype=dtype, device=device)
    a, b = (w, x) if planned.swap else (x, w)
    arguments = (index, planned.handle, planned.m, planned.n, planned.k, _library._ONE_ADDRESS,
                 a.data_ptr(), planned.lda, b.data_ptr(), planned.ldb, _library._ZERO_ADDRESS,
                 y.data_ptr(), planned.ldc, _torch.current_stream(index))
    call, plans = planned.call, _torch._PLANS
    steps = {
        "the timing loop alone (an empty call)": lambda: None,
        "stream: torch._C._cuda_getCurrentRawStream": lambda: _torch.current_stream(index),
        "(stream: torch.cuda.current_stream().cuda_stream)":
            lambda: torch.cuda.current_stream(index).cuda_stream,
        "result: torch.empty(shape, dtype=, device=)":
            lambda: torch.empty(shape, dtype=dtype, device=device),
        "(result: x.new_empty(shape))": lambda: x.new_empty(shape),
        "data_ptr of x, w and the result": lambda: (x.data_ptr(), w.data_ptr(), y.data_ptr()),
        "key: dtypes, shapes, strides, devices":
            lambda: _torch._linear_key(x, w, None, None, "identity"),
        "lookup: one dict get": lambda: plans.get(key),
        "C call: gemmtune_matmul, arguments ready": lambda: call(*arguments),
        "(C call through ctypes, arguments ready)": lambda: planned.ctypes_call(*arguments),
        "(a patched layer's checks: _routable)": lambda: _torch._routable(x, w, None),
    }
    wholes = {"gemmtune.linear(x, w)": lambda: gemmtune.linear(x, w),
              "F.linear(x, w) (cuBLAS)": lambda: F.linear(x, w)}
    if gemmtune.torch_operators:
        wholes["torch.ops.gemmtune.linear(x, w)"] = lambda: torch.ops.gemmtune.linear(x, w)
    wholes.update(layer_calls(x, w))
    with torch.inference_mode():
        times = {name: host_us_per_call(step) for name, step in steps.items()}
        whole_times = {name: host_us_per_call(call) for name, call in wholes.items()}
    loop = times["the timing loop alone (an empty call)"]
    parts = sum(us - loop for name, us in times.items() if not name.startswith(("(", "the ")))
    times["the rest: frames, attribute reads, checks"] = (
        whole_times["gemmtune.linear(x, w)"] - loop - parts)
    return {"steps_us": times, "calls_us": whole_times}


def geometric_mean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


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


BREAKDOWN_SHAPES = [(16, 4096, 4096), (8, 256, 256)]  # tokens, in, out


def print_breakdown(shapes):
    for name, result in shapes.items():
        print(f"where a planned gemmtune.linear's host time goes, bf16 {name} (tokens x in x out; "
              "each step alone, per call; parenthesized: alternatives, not in the path):")
        for step, us in result["steps_us"].items():
            print(f"  {step:52s} {us:7.2f} us")
        for call, us in result["calls_us"].items():
            print(f"  whole: {call:45s} {us:7.2f} us")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=pathlib.Path)
    parser.add_argument("--breakdown", action="store_true",
                        help="time each step of gemmtune.linear's planned path too")
    args = parser.parse_args()
    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
               "python": sys.version.split()[0],
               "native": _library.matmul_function() is not _library.library().gemmtune_matmul,
               "overhead": {"x".join(map(str, shape)): overhead(*shape)
                            for shape in OVERHEAD_SHAPES},
               "model": ratios()}
    for phase, tokens in (("prefill", lambda t: t > 1), ("decode", lambda t: t == 1)):
        rows = [r["ratio"] for r, (t, _, _) in zip(results["model"], model_shapes()) if tokens(t)]
        results[f"{phase}_ratio"] = geometric_mean(rows)
    if args.breakdown:
        results["breakdown"] = {"x".join(map(str, shape)): breakdown(*shape)
                                for shape in BREAKDOWN_SHAPES}
    print("planned calls go through", "gemmtune_native" if results["native"] else "ctypes")
    print_overhead(results["overhead"])
    print("the model's GEMMs, back-to-back calls (ratio = F.linear time / gemmtune time):")
    print(f"  {'problem (M N K)':24s} {'selection':9s} {'gemmtune us':>11s} {'F.linear us':>11s} "
          f"{'TFLOP/s':>8s} {'F.linear':>8s} {'ratio':>6s}")
    for r in results["model"]:
        print(f"  {r['problem']:24s} {r['selection']:9s} {r['gemmtune_us']:11.1f} "
              f"{r['f_linear_us']:11.1f} {r['gemmtune_tflops']:8.1f} {r['f_linear_tflops']:8.1f} "
              f"{r['ratio']:6.2f}")
    print(f"  geometric mean of the ratios: prefill {results['prefill_ratio']:.2f}, "
          f"decode {results['decode_ratio']:.2f}")
    if args.breakdown:
        print_breakdown(results["breakdown"])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
