"""``python -m bench``: the whole benchmark (see :mod:`bench.suite`)."""

from bench.suite import main

raise SystemExit(main())
