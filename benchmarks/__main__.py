r"""``python -m benchmarks NAME [options]``: see :mod:`benchmarks.harness.runner`."""

import sys

from benchmarks.harness.runner import main

sys.exit(main())
