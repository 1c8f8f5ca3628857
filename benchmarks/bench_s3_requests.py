"""Requests and wall time of a small fit whose input, output and checkpoints are on S3.

Against moto's S3 server on 127.0.0.1 (the test extra's ``moto[server]``), reached through
s3fs, as tests/test_s3.py does. The requests are counted where s3fs sends them
(``S3FileSystem._call_s3``, by operation), for the same 40 x 12 fit (8 iterations,
synchronous) with one checkpoint (``checkpoint_every=100``: the one at the end) and with
three (``checkpoint_every=3``); their difference, halved, is the cost of a checkpoint.
On real object storage every request is a round trip of tens of milliseconds, so the
request count is the number that carries over; moto's wall time is printed beside it.

    python benchmarks/bench_s3_requests.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import collections
import logging
import time
import warnings


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    import boto3
    import numpy as np
    import s3fs
    from moto.server import ThreadedMotoServer

    from dask_bid import bayesian_id
    from dask_bid.engine import to_zarr

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    srv = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    try:
        host, port = srv.get_host_and_port()
        ep = f"http://{host}:{port}"
        boto3.client("s3", endpoint_url=ep, region_name="us-east-1", aws_access_key_id="t",
                     aws_secret_access_key="t").create_bucket(Bucket="bench-s3")
        so = {"key": "t", "secret": "t",
              "client_kwargs": {"endpoint_url": ep, "region_name": "us-east-1"}}
        rng = np.random.default_rng(1)
        A = rng.standard_normal((40, 3)) @ rng.uniform(-1, 1, (3, 12))
        to_zarr(A, "s3://bench-s3/A.zarr", chunks=(10, 12), storage_options=so)
        calls = collections.Counter()
        orig = s3fs.S3FileSystem._call_s3

        async def counting(self, method, *a, **k):
            calls[method] += 1
            return await orig(self, method, *a, **k)

        s3fs.S3FileSystem._call_s3 = counting
        n_req = {}
        for rep in range(args.repeats):
            for every in (100, 3):
                calls.clear()
                t = time.perf_counter()
                bayesian_id("s3://bench-s3/A.zarr", 3, n_iter=8, burn_in=2, random_state=3,
                            client="synchronous", checkpoint_every=every,
                            out=f"s3://bench-s3/o-{every}-{rep}.zarr", storage_options=so)
                dt = time.perf_counter() - t
                n = sum(calls.values())
                n_req[every] = n
                print(f"run {rep}  checkpoint_every {every:3d}  {n:5d} requests  "
                      f"{dt:5.2f} s  {dict(calls.most_common())}", flush=True)
        print(f"per checkpoint: {(n_req[3] - n_req[100]) / 2:.0f} requests "
              f"(checkpoint_every 3 makes checkpoints at 3, 6 and 8; 100 only at 8)")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
