"""The checkpoint group's listing (dask_bid/engine/checkpoint.py)."""

import warnings

import zarr

from dask_bid.engine.checkpoint import Checkpointer, StoreSpec, save_blob


def test_listing_ignores_what_is_not_a_checkpoint_and_never_warns(tmp_path):
    root = tmp_path / "fit.zarr"
    zarr.open_group(str(root), mode="w")
    spec = StoreSpec(root)
    ck = Checkpointer(spec)
    for name in ("c0-it00000010", "c0-it00000020", "c1-it00000010"):
        spec.group().require_group(f"checkpoint/{name}")  # as Checkpointer.save does
        save_blob(spec, f"checkpoint/{name}/client", {"state": name}, {"complete": True})
    # what another chain's thread may leave there at the moment of listing: zarr's
    # temporary file of a metadata write, and a checkpoint whose metadata is not written
    (root / "checkpoint" / "zarr.0123abcd.partial").write_text("{}")
    (root / "checkpoint" / "c0-it00000030").mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # zarr's listing warned about the .partial file
        assert [n for _, n in ck._list(0)] == ["c0-it00000010", "c0-it00000020",
                                               "c0-it00000030"]
        assert [n for n, _ in ck.candidates(0)] == ["c0-it00000020", "c0-it00000010"]
        assert ck.latest(1)[1] == {"state": "c1-it00000010"}
        ck.keep = 1
        ck.prune(0)
    # the older complete checkpoint is gone; the newest complete one, the one being
    # written and the other chain's are kept
    left = sorted(p.name for p in (root / "checkpoint").iterdir() if p.is_dir())
    assert left == ["c0-it00000020", "c0-it00000030", "c1-it00000010"]


def test_prune_keeps_at_least_one_and_refuses_zero(tmp_path):
    """``prune(chain, keep=n)`` keeps the n newest complete checkpoints; 0 is refused
    (``complete[-0:]`` would have kept them all: remove_all() deletes every one)."""
    import pytest

    root = tmp_path / "fit.zarr"
    zarr.open_group(str(root), mode="w")
    spec = StoreSpec(root)
    ck = Checkpointer(spec)
    for name in ("c0-it00000010", "c0-it00000020", "c0-it00000030"):
        spec.group().require_group(f"checkpoint/{name}")
        save_blob(spec, f"checkpoint/{name}/client", {"state": name}, {"complete": True})
    with pytest.raises(ValueError, match="keep must be at least 1, got 0"):
        ck.prune(0, keep=0)
    ck.prune(0, keep=2)
    assert [n for _, n in ck._list(0)] == ["c0-it00000020", "c0-it00000030"]
    ck.prune(0, keep=1)
    assert [n for _, n in ck._list(0)] == ["c0-it00000030"]


def test_saved_iterations_are_each_chains_newest_complete_checkpoint(tmp_path):
    """What ``dask-bid info`` reports for an unfinished fit: per chain, the newest
    checkpoint with every part on disk (an incomplete newer one is not resumed from)."""
    from dask_bid.engine.checkpoint import saved_iterations
    from dask_bid.interface.cli.info import info_lines

    root = tmp_path / "fit.zarr"
    zarr.open_group(str(root), mode="w")
    spec = StoreSpec(root)
    assert saved_iterations(spec.group(mode="r")) == {}
    for name, complete in (("c0-it00000020", True), ("c0-it00000010", True),
                           ("c0-it00000030", False), ("c2-it00000005", True)):
        spec.group().require_group(f"checkpoint/{name}")
        save_blob(spec, f"checkpoint/{name}/client", {"state": name}, {"complete": complete})
    spec.group().require_group("checkpoint/c1-it00000040")  # its client never written
    assert saved_iterations(spec.group(mode="r")) == {0: 20, 2: 5}
    info = {"kind": "dask_bid result", "path": str(root), "status": "interrupted",
            "params": {"n_iter": 50, "n_chains": 3}, "summary": {},
            "saved_iterations": [20, 0, 5]}
    assert ("  saved      chain 0: 20, chain 1: 0, chain 2: 5 of 50 iterations (their last "
            "checkpoints: a resume continues each from there, a chain at 0 from its start)"
            ) in info_lines(info)
    info.update(params={"n_iter": 50, "n_chains": 1}, saved_iterations=[0])
    assert ("  saved      nothing yet (no checkpoint: a resume starts the chain again)"
            in info_lines(info))
