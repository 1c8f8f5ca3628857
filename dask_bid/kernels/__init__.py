"""Kernels: pure numpy / numba math on one column block. No Dask here."""

from .block import (
    BlockState,
    StepContext,
    block_add_rows,
    block_aggressive,
    block_box_lstsq,
    block_column,
    block_icm,
    block_init,
    block_lstsq_score,
    block_lstsq_start,
    block_plain_finish,
    block_plain_propose,
    block_posterior,
    block_rebase,
    block_set_mask_row,
    block_traces,
)
from .boxls import box_lstsq, box_qp
from .priors import MODELS, Priors
from .rng import root_entropy, stream
from .stats import barker_accept, draw_sigma2, log_barker, sse_from_stats
from .swap import proposal_gram, swap_delta, swap_delta_masked, swapped_grams, swapped_h
from .sweep import (
    block_quadratics,
    conditional_params,
    draw_hyper_block,
    draw_prior_block,
    sweep_block,
)
from .truncnorm import gtn_cdf, gtn_draw, gtn_logpdf, gtn_offset_cdf, sample_gtn

__all__ = [
    "box_lstsq",
    "box_qp",
    "block_box_lstsq",
    "block_rebase",
    "gtn_draw",
    "sample_gtn",
    "gtn_cdf",
    "gtn_logpdf",
    "gtn_offset_cdf",
    "sweep_block",
    "conditional_params",
    "draw_hyper_block",
    "draw_prior_block",
    "block_quadratics",
    "proposal_gram",
    "swapped_h",
    "swap_delta",
    "swapped_grams",
    "swap_delta_masked",
    "sse_from_stats",
    "draw_sigma2",
    "barker_accept",
    "log_barker",
    "Priors",
    "MODELS",
    "root_entropy",
    "stream",
    "BlockState",
    "StepContext",
    "block_init",
    "block_column",
    "block_add_rows",
    "block_aggressive",
    "block_plain_propose",
    "block_plain_finish",
    "block_lstsq_start",
    "block_lstsq_score",
    "block_icm",
    "block_set_mask_row",
    "block_posterior",
    "block_traces",
]
