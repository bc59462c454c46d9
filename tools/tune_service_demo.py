"""A model process for the tuning service (GPU machine): runs the GEMMs of a decoder block's
decode step (bf16, nn.Linear layout) in a loop and prints, about once a second, one JSON line:
the time per step (CUDA events, back to back) and where each GEMM's kernel came from
(gemmtune.select_linear). With GEMMTUNE_TUNE=background and `gemm-tune --serve` running, the
sources go from "fallback" or "nearest" to "tuned" and the time per step falls, without a restart.

    GEMMTUNE_TUNE=background python3 tools/tune_service_demo.py --seconds 120 --name a
"""
import argparse
import json
import sys
import time

import torch

import gemmtune

# (tokens, out features, in features): a 7B-class decoder's decode step, 8 sequences.
SHAPES = [(8, 4096, 4096), (8, 11008, 4096), (8, 4096, 11008), (8, 12288, 4096)]


def layers(device):
    torch.manual_seed(0)
    out = []
    for tokens, outputs, inputs in SHAPES:
        x = torch.randn(tokens, inputs, device=device, dtype=torch.bfloat16)
        w = torch.randn(outputs, inputs, device=device, dtype=torch.bfloat16) / inputs**0.5
        out.append((x, w))
    return out


def step(model):
    for x, w in model:
        gemmtune.linear(x, w)


def step_us(model, steps=50):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        step(model)
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1e3 / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--name", default="model")
    args = parser.parse_args()
    model = layers("cuda")
    begin = time.monotonic()
    with torch.inference_mode():
        while time.monotonic() - begin < args.seconds:
            line = {"model": args.name, "t": round(time.monotonic() - begin, 2),
                    "step_us": round(step_us(model), 2),
                    "sources": [gemmtune.select_linear(x, w).source for x, w in model]}
            print(json.dumps(line), flush=True)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - begin) % 1.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
