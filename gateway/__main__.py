"""``python -m gateway`` is the ``mrtr-gateway`` command."""

from gateway.cli import main

raise SystemExit(main())
