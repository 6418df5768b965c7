"""The U-Net denoiser's training step (examples/unet_denoiser.py: strided convolutions, GroupNorm,
SiLU, bilinear interpolate, ConvTranspose2d, skip connections; MSE, AdamW) against the same
network in PyTorch CPU eager, from the same weights and data, float32, one thread.

    python benchmarks/bench_unet.py [--rounds 3] [--batch 64] [--width 16] [--cpu-time]
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"   # one BLAS thread, set before NumPy loads

import argparse
import importlib.util

import numpy as np
from common import (
    REPO,
    calibrate,
    format_ratio,
    format_time,
    gc_paused,
    machine_description,
    markdown_table,
    median,
    package_version,
    time_calls,
    use_cpu_clock,
)

import tinytensor as tt
from tinytensor import nn


def example():
    spec = importlib.util.spec_from_file_location("unet_denoiser", REPO / "examples" / "unet_denoiser.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def steps(batch, width):
    U = example()
    rng = np.random.default_rng(0)
    clean = rng.uniform(size=(batch, 1, 8, 8)).astype(np.float32)
    x = (clean + 0.3 * rng.standard_normal(clean.shape)).astype(np.float32)
    model = U.make_unet(np.random.default_rng(0), width=width)
    opt = tt.optim.AdamW(model.parameters(), lr=3e-3)
    loss_fn = nn.MSELoss()

    def tt_step():
        loss = loss_fn(model(x), clean)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    out = {"tinytensor": tt_step}
    if package_version("torch"):
        import torch
        torch.set_num_threads(1)
        ref = U.make_torch_unet(torch, width)
        ref.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in model.state_dict().items()})
        ref_opt = torch.optim.AdamW(ref.parameters(), lr=3e-3)
        tx, ty = torch.from_numpy(x), torch.from_numpy(clean)

        def torch_step():
            loss = torch.nn.functional.mse_loss(ref(tx), ty)
            ref_opt.zero_grad()
            loss.backward()
            ref_opt.step()
            return loss.item()
        first = tt_step(), torch_step()     # the same first loss, from the same weights
        assert abs(first[0] - first[1]) <= 1e-5 * abs(first[1]), first
        out["torch"] = torch_step
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--cpu-time", action="store_true", help="CPU time of this process (a shared machine)")
    args = p.parse_args()
    if args.cpu_time:
        use_cpu_clock()
    fns = steps(args.batch, args.width)
    numbers = {name: calibrate(fn, 0.2) for name, fn in fns.items()}
    samples = {name: [] for name in fns}
    with gc_paused():
        for _ in range(args.rounds):             # interleaved rounds
            for name, fn in fns.items():
                samples[name].append(median(time_calls(fn, numbers[name], 3)))
    times = {name: median(v) for name, v in samples.items()}
    rows = [[name, format_time(t), format_ratio(t / times["torch"]) if "torch" in times else "—"]
            for name, t in times.items()]
    print(markdown_table(["U-Net step (fwd+bwd+AdamW)", "time", "/ torch"], rows))
    print(f"batch {args.batch}, width {args.width}, float32, medians of {args.rounds} interleaved rounds")
    print("\n".join(machine_description([("torch", package_version("torch"))] if "torch" in times else [])))


if __name__ == "__main__":
    main()
