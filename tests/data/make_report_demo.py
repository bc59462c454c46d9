#!/usr/bin/env python3
"""Writes report-demo.json: an illustrative tuning database (made-up numbers in the range the
H100 measures, not measurements) for gemm-db report's test and the README's screenshot.
Template versions are "@simt" and "@wgmma_sm90": the test puts this build's in their place,
so the rows count as current, and gives those rows valid configurations of this build's search
spaces (an import takes no other). Run: python3 make_report_demo.py > report-demo.json"""
import json
import random

rng = random.Random(9)
H100 = {"name": "NVIDIA H100 80GB HBM3", "cc": 90, "sms": 132, "driver": 13000, "nvrtc": "13.0"}
H200 = {"name": "NVIDIA H200", "cc": 90, "sms": 132, "driver": 13000, "nvrtc": "13.0"}
FAILURES = [
    ("out_of_resources", "needs 233472 bytes of shared memory per block, the GPU has 232448"),
    ("compile_error", "ptxas error: Entry function uses too much shared data"),
    ("wrong_result", "max error 3.1e-01 at (17, 130) exceeds 1.6e-02"),
    ("timeout", "the kernel did not finish within 60 s"),
]


def wgmma_kernels(dtype, layout, count):
    names = {}
    while len(names) < count:
        bm, bn = rng.choice([64, 128, 256]), rng.choice([64, 128, 192, 256])
        stages, cluster = rng.choice([3, 4, 5, 6]), rng.choice(["1x1", "2x1", "1x2"])
        schedule = rng.choice(["ws", "mt"])
        store = rng.choice(["", "_tmastore"]) if schedule == "ws" else ""
        names[f"gemm_wgmma_{dtype}_{layout}_{bm}x{bn}x64_s{stages}_wg2_c{cluster}_"
              f"{schedule}_rm{store}"] = {"BM": bm, "BN": bn, "BK": 64, "STAGES": stages}
    return sorted(names.items())


def simt_kernels(count):
    names = {}
    while len(names) < count:
        bm, bn, bk = rng.choice([64, 128]), rng.choice([64, 128]), rng.choice([8, 16])
        tm, tn, stages = rng.choice([4, 8]), rng.choice([4, 8]), rng.choice([2, 3])
        names[f"gemm_simt_f32_nn_{bm}x{bn}x{bk}_w64x32_t{tm}x{tn}_v4_s{stages}"] = {
            "BM": bm, "BN": bn, "BK": bk, "TM": tm, "TN": tn, "STAGES": stages}
    return sorted(names.items())


def entry(device, dtype, layout, m, n, k, best_tflops, cublas_ratio, count, day, finished=True):
    rows = {"n": m, "t": k}[layout[0]], {"n": k, "t": n}[layout[1]]
    problem = {"dtype": dtype, "layout": layout, "m": m, "n": n, "k": k, "lda": rows[0],
               "ldb": rows[1], "ldc": m, "align": 16}
    family = "simt" if dtype == "f32" else "wgmma_sm90"
    kernels = simt_kernels(count) if family == "simt" else wgmma_kernels(dtype, layout, count)
    flops = 2.0 * m * n * k
    candidates = []
    for i, (name, params) in enumerate(kernels):
        tflops = best_tflops * (1 if i == 0 else rng.uniform(0.35, 0.985))
        c = {"kernel_name": name, "template_version": "@" + family,
             "config": {"dtype": dtype, "family": family, "layout": layout, "params": params},
             "registers": rng.choice([90, 128, 154, 168, 232]), "spills": 0,
             "smem_bytes": rng.randrange(32, 228) * 1024, "compile_ms": rng.uniform(180, 420),
             "measured_at": f"2025-11-{day:02d}T0{i % 10}:{i % 60:02d}:00.000Z"}
        if i > 0 and rng.random() < 0.12:
            status, message = rng.choice(FAILURES)
            c.update(status=status, message=message)
        else:
            ms = flops / (tflops * 1e9)
            c.update(status="ok", median_ms=ms, min_ms=ms * 0.99, max_ms=ms * 1.02, runs=40,
                     tflops=tflops, max_error=rng.uniform(1e-4, 4e-3), message="")
        candidates.append(c)
    winner = candidates[0]
    best = [{"kernel_name": winner["kernel_name"], "template_version": winner["template_version"],
             "baseline_ms": winner["median_ms"] * cublas_ratio, "complete": True,
             "tuned_at": f"2025-11-{day:02d}T10:00:00.000Z"}] if finished else []
    return {"device": device, "problem": problem, "candidates": candidates, "best": best}


def stale(device, entry_):
    """The same problem measured with templates this build no longer has."""
    old = json.loads(json.dumps(entry_))
    for c in old["candidates"]:
        c["template_version"] = "0f1e2d3c4b5a6978"
    old["best"][0]["template_version"] = "0f1e2d3c4b5a6978"
    old["best"][0]["tuned_at"] = "2025-10-02T10:00:00.000Z"
    for c in old["candidates"]:
        c["measured_at"] = "2025-10-02T09:00:00.000Z"
    old["candidates"] = old["candidates"][:6]
    return old


h100 = [
    entry(H100, "bf16", "tn", 4096, 4096, 4096, 641.0, 1.01, 21, 20),
    entry(H100, "bf16", "tn", 6144, 4096, 4096, 702.0, 0.99, 20, 20),
    entry(H100, "bf16", "tn", 11008, 4096, 4096, 731.0, 1.02, 22, 20),
    entry(H100, "bf16", "tn", 4096, 4096, 11008, 684.0, 0.97, 18, 20),
    entry(H100, "bf16", "tn", 28672, 2048, 8192, 748.0, 1.01, 24, 21),
    entry(H100, "bf16", "tn", 4096, 1, 4096, 1.9, 0.88, 14, 21),
    entry(H100, "bf16", "tn", 11008, 8, 4096, 31.0, 0.93, 15, 21),
    entry(H100, "bf16", "tn", 6144, 32, 4096, 118.0, 0.96, 16, 21),
    entry(H100, "bf16", "tn", 28672, 64, 8192, 395.0, 1.04, 18, 21),
    entry(H100, "f32", "nn", 4096, 4096, 4096, 46.0, 0.90, 14, 22),
]
h200 = [
    entry(H200, "bf16", "nn", 8192, 8192, 8192, 694.5, 1.03, 24, 22),
    entry(H200, "f16", "nn", 8192, 8192, 8192, 673.8, 1.02, 21, 22),
    entry(H200, "bf16", "nn", 2048, 2048, 2048, 625.7, 0.97, 18, 22),
    entry(H200, "bf16", "tn", 768, 128, 768, 21.0, 0.85, 12, 23, finished=False),
]
entries = h100 + h200 + [stale(H200, h200[0])]
# One line per entry: small, and a diff still shows which entry changed.
print('{"format": "gemmtune-db", "version": 1, "entries": [')
print(",\n".join(json.dumps(e, separators=(",", ":")) for e in entries))
print("]}")
