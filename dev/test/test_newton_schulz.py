#!/usr/bin/env python3
"""
-opt muon's orthogonalization (llmc/muon.h) as train_gpt2 computes it, held against numpy's SVD.
dev/test/newton_schulz (built from dev/test/newton_schulz.c) runs train_gpt2.c's muon_update on
each matrix G and returns the orthogonalized update O.

The reference: X0 = G / (||G||_F + 1e-7) has the SVD U diag(s) V^T, and every Newton-Schulz step
X -> a X + (b X X^T + c (X X^T)^2) X maps each singular value s to p(s) = a s + b s^3 + c s^5 and
keeps the singular vectors, so five steps give exactly U diag(p(p(p(p(p(s)))))) V^T, which numpy
computes from the SVD in float64 without iterating on matrices. Per matrix:
  1. O against that reference: max|O - ref| <= 2e-4 * max|ref|. The trainer iterates in fp32:
     each step's products round to 2^-24 relative, and p' (up to a = 3.4 near 0) amplifies what
     earlier steps left in the small singular directions; measured up to 2e-5 on these matrices.
     A wrong coefficient, a missing transpose or a skipped step is off by order 1.
  2. O's singular values (numpy's SVD of O) are p^5(s) (sorted, within 2e-4), and in G's singular
     directions (u_i^T O v_i) those whose input s >= 0.002 lie in the band [0.68, 1.21] that these
     coefficients are designed for (five steps map [0.002, 1] into [0.6818, 1.2024]); below that,
     s is only scaled up (p(s) ~ 3.4 s), as the reference has it.
Matrices: Gaussian, square, wide and tall (both orientations); ill-conditioned ones with singular
values spread from 1 to 1e-6 (so some fall below 0.002) in both orientations; and one of rank 3.

  python3 dev/test/test_newton_schulz.py dev/test/newton_schulz
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

A, B, C = 3.4445, -4.7750, 2.0315
STEPS, EPS = 5, 1e-7
BAND_FROM, BAND = 0.002, (0.68, 1.21)


def quintic(s, steps=STEPS):
    for _ in range(steps):
        s = A * s + B * s ** 3 + C * s ** 5
    return s


def matrices(rng):
    def spread(rows, cols, lo):
        r = min(rows, cols)
        u, _ = np.linalg.qr(rng.standard_normal((rows, r)))
        v, _ = np.linalg.qr(rng.standard_normal((cols, r)))
        return (u * np.logspace(0, np.log10(lo), r)) @ v.T
    low_rank = rng.standard_normal((40, 3)) @ rng.standard_normal((3, 72))
    return [("gaussian 64x64", rng.standard_normal((64, 64))),
            ("gaussian 48x128 (wide)", rng.standard_normal((48, 128))),
            ("gaussian 128x48 (tall)", rng.standard_normal((128, 48))),
            ("ill-conditioned 32x96 (wide), s 1..1e-6", spread(32, 96, 1e-6)),
            ("ill-conditioned 96x32 (tall), s 1..1e-6", spread(96, 32, 1e-6)),
            ("rank 3, 40x72", low_rank)]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: test_newton_schulz.py <dev/test/newton_schulz binary>")
    cases = matrices(np.random.default_rng(7))
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.bin"), os.path.join(tmp, "out.bin")
        with open(src, "wb") as f:
            f.write(np.int32(len(cases)).tobytes())
            for _, g in cases:
                f.write(np.array(g.shape, dtype="<i4").tobytes() + g.astype("<f4").tobytes())
        subprocess.run([sys.argv[1], src, dst], check=True)
        raw = open(dst, "rb").read()
    off, failed = 4, 0
    for name, g in cases:
        rows, cols = np.frombuffer(raw, "<i4", 2, off)
        o = np.frombuffer(raw, "<f4", rows * cols, off + 8).reshape(rows, cols).astype(np.float64)
        off += 8 + 4 * rows * cols
        g32 = g.astype(np.float32).astype(np.float64)  # what the trainer was given
        u, s, vt = np.linalg.svd(g32 / (np.linalg.norm(g32) + EPS), full_matrices=False)
        ref = (u * quintic(s)) @ vt
        err = np.abs(o - ref).max() / np.abs(ref).max()
        spectrum = np.abs(np.sort(np.linalg.svd(o, compute_uv=False)) - np.sort(quintic(s))).max()
        inband = np.einsum("ij,ij->j", u, o @ vt.T)[s >= BAND_FROM]  # u_i^T O v_i
        ok = err <= 2e-4 and spectrum <= 2e-4 and inband.size > 0 and BAND[0] <= inband.min() and inband.max() <= BAND[1]
        print(f"{'ok  ' if ok else 'FAIL'} {name}: max|O - ref|/max|ref| {err:.1e}, singular values off p^5(s) by "
              f"{spectrum:.1e} (tolerance 2e-4 each); {inband.size} of {s.size} from s >= {BAND_FROM} in "
              f"[{inband.min():.3f}, {inband.max():.3f}] (band {BAND[0]}..{BAND[1]})")
        failed += not ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
