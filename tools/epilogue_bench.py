"""Fused epilogues against the unfused torch sequence a model runs (GPU machine), for
docs/PERF.md, 'Fused epilogues':

  bias,gelu  gemmtune.linear(x, w, b, activation="gelu")  vs  F.gelu(F.linear(x, w, b))
  swiglu     gemmtune.gated_linear(x, w)                  vs  F.silu(g) * u, (g, u) = F.linear(x, w).chunk(2, -1)

on the nn.Linear rows of a shapes file ("out tokens in bf16 tn"; swiglu's out is the gate and up
rows together), each timed back to back in eager mode and as a replayed CUDA graph (the GPU's
time alone, the host's launches removed), the two sides' runs in turns; the ratio is torch's
time over gemmtune's, median of the rounds, with its spread.

    python3 tools/epilogue_bench.py --shapes llm-shapes.txt [--json FILE]
"""
import argparse
import json
import math
import pathlib
import statistics
import sys

import torch
import torch.nn.functional as F

import gemmtune
from python_bench import us_per_call as per_call_us  # tools/, beside this file


def linear_rows(path):
    """(out, tokens, in) of the file's bf16 tn lines."""
    rows = []
    for line in pathlib.Path(path).read_text().splitlines():
        words = line.split("#")[0].split()
        if len(words) >= 5 and words[3] == "bf16" and words[4] == "tn":
            rows.append(tuple(int(w) for w in words[:3]))
    return rows


def graphed(call, repeats):
    """The call captured `repeats` times in one CUDA graph; replaying it times the GPU alone."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # kernels loaded, the stream's workspace made, before capture
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        for _ in range(repeats):
            call()
    return lambda: graph.replay()


def compare(ours, theirs, rounds, repeats, graph):
    if graph:
        ours, theirs = graphed(ours, repeats), graphed(theirs, repeats)
        timed = lambda call: per_call_us(call, 1) / repeats  # noqa: E731
    else:
        timed = lambda call: per_call_us(call, repeats)  # noqa: E731
    for _ in range(3):  # warm-up: clocks up
        timed(ours), timed(theirs)
    ratios, ours_us, theirs_us = [], [], []
    for _ in range(rounds):  # in turns, so both see the same clocks
        o, t = timed(ours), timed(theirs)
        ours_us.append(o)
        theirs_us.append(t)
        ratios.append(t / o)
    return {"gemmtune_us": statistics.median(ours_us), "torch_us": statistics.median(theirs_us),
            "ratio": statistics.median(ratios), "spread": [min(ratios), max(ratios)]}


def cases(out, tokens, features):
    x = torch.randn(tokens, features, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(out, features, device="cuda", dtype=torch.bfloat16) / math.sqrt(features)
    b = torch.randn(out, device="cuda", dtype=torch.bfloat16)

    def unfused_gated():
        g, u = F.linear(x, w).chunk(2, -1)
        return F.silu(g) * u

    yield ("bias,gelu", lambda: gemmtune.linear(x, w, b, activation="gelu"),
           lambda: F.gelu(F.linear(x, w, b)))
    if out % 2 == 0:
        yield "swiglu", lambda: gemmtune.gated_linear(x, w, activation="silu"), unfused_gated


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", required=True)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args()
    results = []
    with torch.inference_mode():
        for out, tokens, features in linear_rows(args.shapes):
            for name, ours, theirs in cases(out, tokens, features):
                row = {"epilogue": name, "out": out, "tokens": tokens, "in": features,
                       "decode": tokens <= 128}
                repeats = 50 if tokens <= 128 else 10
                for mode in ("eager", "graph"):
                    try:
                        row[mode] = compare(ours, theirs, args.rounds, repeats, mode == "graph")
                    except Exception as e:  # noqa: BLE001 -- reported, the other rows go on
                        row[mode] = {"error": str(e).splitlines()[0]}
                        print(f"{name} {out} {tokens} {features} {mode}: {row[mode]['error']}")
                        torch.cuda.synchronize()
                results.append(row)
                print(f"{name:10s} {out:6d} {tokens:5d} {features:6d}  " +
                      "  ".join(f"{mode} {row[mode]['ratio']:.3f} ({row[mode]['gemmtune_us']:.1f} "
                                f"vs {row[mode]['torch_us']:.1f} us)"
                                for mode in ("eager", "graph") if "ratio" in row[mode]),
                      flush=True)
    summary = {}
    for name in ("bias,gelu", "swiglu"):
        for decode in (True, False):
            for mode in ("eager", "graph"):
                r = [row[mode]["ratio"] for row in results
                     if row["epilogue"] == name and row["decode"] == decode and "ratio" in row[mode]]
                if r:
                    key = f"{name} {'decode' if decode else 'prefill'} {mode}"
                    summary[key] = {"geomean": math.exp(sum(map(math.log, r)) / len(r)),
                                    "worst": min(r), "rows": len(r)}
                    print(f"{key:30s} geomean {summary[key]['geomean']:.3f} worst "
                          f"{summary[key]['worst']:.3f} over {len(r)} rows")
    if args.json:
        args.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(),
                                         "torch": torch.__version__, "rows": results,
                                         "summary": summary}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
