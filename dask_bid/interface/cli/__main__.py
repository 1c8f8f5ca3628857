"""``python -m dask_bid.interface.cli``: the ``dask-bid`` command."""

import sys

from .main import main

sys.exit(main())
