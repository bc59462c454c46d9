"""Record, then tune: a transformer block built from nn.Linear layers runs its GEMMs through
gemmtune, records the problems it needed, and after `gemm-tune --shapes` runs them all tuned.

    GEMMTUNE_RECORD=shapes.txt python3 record_then_tune.py run      # first run: records
    gemm-tune --shapes shapes.txt --budget 16                       # tunes exactly those
    GEMMTUNE_RECORD=shapes.txt python3 record_then_tune.py run --expect-tuned

Each run compares the block's outputs (prefill, then decode steps) with the same block on
torch.nn.functional.linear, and says which kernel every problem used (gemmtune.select_linear).
--json FILE writes what it found. The model needs nothing but torch; no weights are loaded.
"""
import argparse
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import gemmtune


class Block(nn.Module):
    """A pre-norm transformer block (attention + SwiGLU MLP) with a key/value cache."""

    def __init__(self, d_model=2048, heads=16, d_ff=5632):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def attention(self, x, cache):
        batch, tokens, d = x.shape
        q, k, v = (t.view(batch, tokens, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(x).split(d, dim=-1))
        if cache:
            k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
        cache["k"], cache["v"] = k, v
        y = F.scaled_dot_product_attention(q, k, v, is_causal=tokens > 1)
        return self.out(y.transpose(1, 2).reshape(batch, tokens, d))

    def forward(self, x, cache):
        x = x + self.attention(self.norm1(x), cache)
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def use_gemmtune(model, on=True):
    """Every nn.Linear of the model computes with gemmtune.linear (on) or as before (off)."""
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            if on:
                layer.forward = lambda x, layer=layer: gemmtune.linear(x, layer.weight, layer.bias)
            elif "forward" in layer.__dict__:
                del layer.forward


def generate(model, prompt, steps):
    """Outputs of a prefill over the prompt, then of decode steps of one token each."""
    cache = {}
    outputs = [model(prompt, cache)]
    for step in steps:
        outputs.append(model(step, cache))
    return outputs


def linear_inputs(model, prompt, steps):
    """(x, layer) of every nn.Linear call of one generation: the GEMMs the model needs."""
    seen = []
    hooks = [layer.register_forward_pre_hook(lambda layer, args: seen.append((args[0], layer)))
             for layer in model.modules() if isinstance(layer, nn.Linear)]
    generate(model, prompt, steps)
    for hook in hooks:
        hook.remove()
    return seen


def relative_error(got, want):
    return ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["run"])
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--decode-steps", type=int, default=4)
    parser.add_argument("--expect-tuned", action="store_true",
                        help="fail unless every problem has a kernel tuned for it")
    parser.add_argument("--json", help="write the findings to this file")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = Block().to("cuda", torch.bfloat16).eval()
    prompt = torch.randn(1, args.prompt_tokens, 2048, device="cuda", dtype=torch.bfloat16)
    steps = [torch.randn(1, 1, 2048, device="cuda", dtype=torch.bfloat16)
             for _ in range(args.decode_steps)]
    with torch.inference_mode():
        want = generate(model, prompt, steps)
        use_gemmtune(model)
        got = generate(model, prompt, steps)
        errors = [relative_error(g, w) for g, w in zip(got, want)]
        problems = {}
        for x, layer in linear_inputs(model, prompt, steps):
            p = gemmtune.problem_linear(x, layer.weight)
            if p not in problems:
                problems[p] = gemmtune.select_linear(x, layer.weight)

    tolerance = 2e-2  # bf16: a few roundings of the output, in another summation order
    print(f"outputs vs F.linear (max |error| / max |F.linear|): prefill {errors[0]:.2e}, "
          f"decode {', '.join(f'{e:.2e}' for e in errors[1:])} (tolerance {tolerance})")
    print(f"{len(problems)} GEMM problems:")
    for p, s in problems.items():
        print(f"  {p.shape_line():24s} {s.source:9s} {s.kernel}" + (f"  ({s.note})" if s.note else ""))
    untuned = [p for p, s in problems.items() if s.source != "tuned"]
    device = next(iter(problems.values())).device
    print(f"device key: {device}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"errors": errors, "tolerance": tolerance, "device": device,
                       "problems": [{"shape_line": p.shape_line(), **s._asdict()}
                                    for p, s in problems.items()]}, f, indent=1)
    ok = max(errors) < tolerance and not (args.expect_tuned and untuned)
    if args.expect_tuned and untuned:
        print(f"NOT TUNED: {', '.join(p.shape_line() for p in untuned)}")
    print("record_then_tune:", "passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
