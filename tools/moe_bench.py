"""The MoE suite's bf16 rows through the Python package against torch._grouped_mm (GPU machine),
for docs/PERF.md, 'The MoE suite': the same tokens, weights and routing for
both, timed in turns back to back; per row the median ratio (torch's time over ours) and its
spread, TFLOP/s, and for decode rows (16 tokens an expert or fewer) the share of the HBM bandwidth
at which each streams the weights of the experts that have tokens.

    python3 tools/moe_bench.py SHAPES [--routing uniform|skewed] [--json FILE]
    python3 tools/moe_bench.py SHAPES --bmm [--json FILE]

With --bmm, every expert gets exactly the mean tokens, and gemmtune.bmm is timed against torch.bmm
(cuBLAS's strided batched GEMM) on a (G, N, K) and a (G, K, M) tensor.

SHAPES is a suite file (M N K dtype tn groups=G: M out features, N the mean tokens an expert, K
in features); rows of other types or scalings are left out. Weights are nn.Linear's (G, M, K),
passed transposed; the routing sends each token to a random expert (uniform), or ten times the
mean to expert 0 and the rest at random (skewed).
"""
import argparse
import json
import statistics
import sys

import torch

import gemmtune
from python_bench import us_per_call  # this folder's: back-to-back calls timed with events


def suite_rows(path):
    """(M, mean N, K, G) of every bf16 grouped row."""
    rows = []
    for line in open(path):
        fields = line.split("#")[0].split()
        if len(fields) < 5 or fields[3] != "bf16":
            continue
        keys = dict(f.split("=", 1) for f in fields[5:] if "=" in f)
        if "groups" not in keys or keys.get("scaling", "none") != "none":
            continue
        rows.append((int(fields[0]), int(fields[1]), int(fields[2]), int(keys["groups"])))
    return rows


def routing_ends(tokens, groups, skewed, seed):
    """torch._grouped_mm's offs for `tokens` tokens routed to `groups` experts."""
    g = torch.Generator().manual_seed(seed)
    first = min(tokens, 10 * -(-tokens // groups)) if skewed and groups > 1 else 0
    experts = torch.randint(1 if first else 0, groups, (tokens - first,), generator=g)
    sizes = torch.bincount(experts, minlength=groups)
    sizes[0] += first
    return sizes.cumsum(0).to(torch.int32).cuda()


def ms_per_call(call, calls):
    return us_per_call(call, calls) * 1e-3


def grouped_calls(m, mean, k, groups, skewed):
    """(ours, torch's, weights read) of grouped_mm on the row's tokens and nn.Linear's weights."""
    tokens = mean * groups
    x = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(groups, m, k, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    offs = routing_ends(tokens, groups, skewed, seed=m + k)
    # The weights of the experts with tokens: an expert without any is never read.
    busy = int((torch.diff(offs, prepend=offs.new_zeros(1)) > 0).sum())
    return (lambda: gemmtune.grouped_mm(x, w, offs), lambda: torch._grouped_mm(x, w, offs=offs),
            2.0 * m * k * busy)


def bmm_calls(m, mean, k, groups):
    """(ours, torch's, weights read) of bmm: every expert the mean tokens."""
    a = torch.randn(groups, mean, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(groups, k, m, device="cuda", dtype=torch.bfloat16)
    return lambda: gemmtune.bmm(a, b), lambda: torch.bmm(a, b), 2.0 * m * k * groups


def bench_row(m, mean, k, groups, skewed, bmm, rounds=7):
    tokens = mean * groups
    ours, theirs, weights = (bmm_calls(m, mean, k, groups) if bmm else
                             grouped_calls(m, mean, k, groups, skewed))
    want, got = theirs().float(), ours().float()
    error = ((got - want).abs().max() / want.abs().max()).item()
    calls = max(3, min(200, int(2e10 / (2 * m * tokens * k) + 1)))
    for call in (ours, theirs):  # warm: kernels loaded, clocks up
        ms_per_call(call, calls)
    times = {"ours": [], "torch": []}
    for _ in range(rounds):
        times["ours"].append(ms_per_call(ours, calls))
        times["torch"].append(ms_per_call(theirs, calls))
    ratios = [t / o for o, t in zip(times["ours"], times["torch"])]
    flops = 2.0 * m * tokens * k
    row = {"m": m, "mean": mean, "k": k, "groups": groups, "routing": "bmm" if bmm else
           "skewed" if skewed else "uniform", "ratio": statistics.median(ratios), "ratio_min": min(ratios),
           "ratio_max": max(ratios), "error_vs_torch": error}
    for name, t in times.items():
        ms = statistics.median(t)
        row[name + "_us"] = ms * 1e3
        row[name + "_tflops"] = flops / (ms * 1e9)
        row[name + "_weights_gbs"] = weights / (ms * 1e6)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shapes")
    parser.add_argument("--routing", choices=["uniform", "skewed"], default="uniform")
    parser.add_argument("--bmm", action="store_true", help="gemmtune.bmm against torch.bmm")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    for m, mean, k, groups in suite_rows(args.shapes):
        r = bench_row(m, mean, k, groups, args.routing == "skewed", args.bmm)
        rows.append(r)
        print(f"{m:6d} {mean:5d} {k:6d} G={groups:<4d} ours {r['ours_tflops']:6.1f} torch "
              f"{r['torch_tflops']:6.1f} TFLOP/s  x{r['ratio']:.3f} ({r['ratio_min']:.3f}-"
              f"{r['ratio_max']:.3f})  weights {r['ours_weights_gbs']:5.0f} / "
              f"{r['torch_weights_gbs']:5.0f} GB/s  err {r['error_vs_torch']:.2e}", flush=True)
    geomean = statistics.geometric_mean([r["ratio"] for r in rows])
    print(f"geomean x{geomean:.3f}, worst x{min(r['ratio'] for r in rows):.3f}")
    if args.json:
        json.dump({"rows": rows, "geomean": geomean, "torch": torch.__version__},
                  open(args.json, "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
