"""Exposed gradient communication per step for 8 GPUs on one node and 2 nodes of 8, from one GPU's
measurements (issues 5, 17): the backward times and the 1-rank NCCL launch and copy costs that
build/bench_layers prints, and published bus bandwidths (dev/bench/RESULTS.md).

usage: python dev/bench/exposed_comm.py <bench_layers output> [RANKS:GBPS ...]
       (default setups: 8 GPUs on NVLink at 370 and at 480 GB/s, 2 x 8 GPUs over 100 Gb/s Ethernet
       at 12 GB/s)

A ring all-reduce of n bytes over W ranks takes n x 2(W-1)/W / bus bandwidth, plus the launch
cost measured on one rank. Without overlap, all gradients are reduced in one call after the
backward: all of it is exposed. With overlap (the trainer's -pb nccl), layer l's reduction is
queued when its backward ends, the reductions run one after another on their own stream, and the
last one (wte, wpe, lnf) starts after the embeddings' backward: exposed is what runs past the
end of the backward. The model assumes the reductions do not slow the backward down. Where bench_layers' phases line
gives the step's time, each exposed time is also given as a share of it (one GPU's step: with
data parallelism every GPU runs the same step)."""
import re, sys

USAGE = next(line for line in __doc__.splitlines() if line.startswith("usage:"))

SETUPS = [("8 GPUs, one node, NVLink", 8, 370.0), ("8 GPUs, one node, NVLink", 8, 480.0),
          ("2 nodes x 8 GPUs, 100 Gb/s Ethernet", 16, 12.0)]


def number(pattern, text, what):
    m = re.search(pattern, text, re.M)
    if not m:
        sys.exit(f"error: exposed_comm: no {what} in the bench_layers output (pattern {pattern!r})")
    return [float(g) for g in m.groups()]


def setup(arg):
    m = re.fullmatch(r"(\d+):([0-9.]+)", arg)
    if not m or int(m[1]) < 2 or float(m[2]) <= 0:
        sys.exit(f"error: exposed_comm: setup '{arg}': expected RANKS:GBPS with at least 2 ranks, e.g. 8:370")
    return (f"{m[1]} ranks", int(m[1]), float(m[2]))


def main():
    if len(sys.argv) < 2:
        sys.exit(f"error: exposed_comm: no input; {USAGE}")
    try:
        text = open(sys.argv[1], errors="replace").read()
    except OSError as e:
        sys.exit(f"error: exposed_comm: cannot read {sys.argv[1]}: {e.strerror} (give build/bench_layers' output)")
    setups = [setup(a) for a in sys.argv[2:]] or SETUPS
    m = re.search(r"-e (\S+) \(L (\d+), C \d+\), B (\d+), T (\d+)", text)
    if not m:
        sys.exit(f"error: exposed_comm: no model line ('-e NAME (L .., C ..), B .., T ..') in {sys.argv[1]}: is it build/bench_layers' output?")
    model, L, B, T = m.groups()
    L = int(L)
    head, layer, embed = number(r"backward: LM head \+ final LayerNorm ([0-9.]+) ms \| per layer mean ([0-9.]+) ms"
                                r".*\| embeddings ([0-9.]+) ms", text, "backward line")
    layer_mb, all_mb = number(r"gradients of one layer: \d+ bf16 values \(([0-9.]+) MB\).*all gradients ([0-9.]+) MB",
                              text, "gradient sizes")
    launch_layer, = number(r"NCCL all-reduce on 1 rank, one layer.*: ([0-9.]+) ms", text, "1-rank layer all-reduce")
    launch_all, = number(r"NCCL all-reduce on 1 rank, all gradients.*: ([0-9.]+) ms", text, "1-rank all-gradient all-reduce")
    m = re.search(r"^  zero gradients .*\| step ([0-9.]+) ms", text, re.M)  # the phases line, where there is one
    step_ms = float(m.group(1)) if m else 0.0
    rest_mb = all_mb - L * layer_mb  # wte, wpe, lnf: reduced after the embeddings' backward
    backward = head + L * layer + embed
    print(f"{model}, B={B}, T={T}: backward {backward:.2f} ms ({L} layers of {layer:.3f} ms); gradients {all_mb:.1f} MB "
          f"({layer_mb:.2f} MB per layer, {rest_mb:.1f} MB embeddings + lnf); 1-rank NCCL: {launch_layer:.3f} ms per layer, "
          f"{launch_all:.3f} ms for all")
    for name, W, bw in setups:
        f = 2 * (W - 1) / W / (bw * 1e9) * 1e6 * 1e3  # ms per MB
        no_overlap = launch_all + all_mb * f
        t, comm_free = head, 0.0
        for _ in range(L):  # layers L-1 .. 0, each reduction queued when its backward ends
            t += layer
            comm_free = max(comm_free, t) + launch_layer + layer_mb * f
        t += embed
        comm_free = max(comm_free, t) + launch_layer + rest_mb * f
        with_overlap = comm_free - t
        share = lambda ms: f" ({100 * ms / step_ms:.1f}% of the {step_ms:.1f} ms step)" if step_ms > 0 else ""
        print(f"  {name} ({W} ranks, {bw:.0f} GB/s bus): one layer {launch_layer + layer_mb * f:.3f} ms; exposed per step: "
              f"without overlap {no_overlap:.2f} ms{share(no_overlap)}, with overlap {with_overlap:.2f} ms{share(with_overlap)}")


if __name__ == "__main__":
    main()
