"""Why masked chains got stuck, and what the redraw swap does there (docs/model.md,
"The redraw swap").

Four masked chains on CCLE EC50 (the paper's preprocessing, K = 10) from the default
start, with the redraw swap off (``n_redraw=0``, the default before it). Where one chain
ends with a drug that the others do not have, the script lists the pivot swap's scores
(the blocks' column terms, before the GHK terms of the two swapped columns) of every
attempt after the burn-in that proposed exactly that exchange in that chain, and then the
redraw swap's log ratio for the same exchange from that chain's last state (W drawn from
its GHK proposal as a stand-in for the chain's own W, which the fit does not keep whole;
10 repetitions).

    python benchmarks/probe_masked_swaps.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import dask_bid.engine.chain as chain_mod  # noqa: E402
import dask_bid.engine.memory as memory_mod  # noqa: E402
from dask_bid import BayesianID  # noqa: E402
from dask_bid.datasets import load_dataset  # noqa: E402
from dask_bid.kernels.pivot import ghk_column  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(f"command: python {' '.join(sys.argv)}")
    A = load_dataset("ccle_ec50", args.data, n_copies=2, fill_value=np.nan).data
    n0 = A.shape[1] // 2
    scores = collections.defaultdict(float)  # (chain, iteration, sub, p, u) -> sum over blocks
    real = chain_mod.block_pivot_score

    def recorded(state, ctx):
        state, out = real(state, ctx)
        for i, att in enumerate(ctx.pivot):
            scores[(ctx.chain, ctx.iteration, att.sub, att.p, att.u)] += out[0][i]
        return state, out

    chain_mod.block_pivot_score = recorded
    memory_mod.MASK_ROW_OPS[recorded] = "pivot"  # the products the pivot needs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = BayesianID(10, n_chains=4, random_state=args.seed, missing="mask",
                         n_redraw=0).fit(A)
    last = [sorted({int(j) % n0 for j in est.result_.draws_columns[c, -1]})
            for c in range(4)]
    for c in range(4):
        print(f"chain {c}: drugs {last[c]}, last MSE {est.trace_['mse'][c, -1]:.4f}")
    counts = collections.Counter(d for b in last for d in b)
    odd = [(c, d) for c in range(4) for d in last[c] if counts[d] == 1]
    missing = [d for d, n in counts.items() if n == 3]
    if len(odd) != 1 or len(missing) != 1:
        print("no chain alone with one drug against three: nothing to probe")
        return
    c, a = odd[0]
    b = missing[0]
    vals = sorted((it, tot) for (ch, it, _, p, u), tot in scores.items()
                  if ch == c and it >= est.burn_in and p % n0 == a and u % n0 == b)
    shown = ", ".join("out of the box" if not np.isfinite(t) else f"{t:.1f}" for _, t in vals)
    print(f"\nchain {c}: drug {a} -> drug {b} proposed by the pivot swap {len(vals)} times "
          f"after the burn-in; its column terms (nats): {shown}")
    # the redraw swap's log ratio from chain c's last state
    obs = np.isfinite(A)
    A0 = np.where(obs, A, 0.0)
    J = [int(j) for j in est.result_.draws_columns[c, -1]]
    s2 = float(est.trace_["sigma2"][c, -1])
    k = next(i for i, j in enumerate(J) if j % n0 == a)
    rng = np.random.default_rng(1)

    def weights(J, W=None):
        C = A0[:, J]
        tot, Wn = 0.0, np.empty((len(J), A.shape[1]))
        for n in range(A.shape[1]):
            o = obs[:, n]
            G, h = C[o].T @ C[o], C[o].T @ A0[o, n]
            lw, Wn[:, n] = ghk_column(rng if W is None else None, G, h, 0.0, 1.0, s2, -1.0,
                                      1.0, w=None if W is None else W[:, n])
            tot += lw
        return tot, Wn

    for u in (b, b + n0):
        J2 = list(J)
        J2[k] = u
        ratios = []
        for _ in range(10):
            _, W = weights(J)
            ratios.append(weights(J2)[0] - weights(J, W)[0])
        print(f"redraw swap, slot of drug {a} <- column {u} (drug {b}): log ratio "
              f"{np.round(ratios, 1).tolist()}")


if __name__ == "__main__":
    main()
