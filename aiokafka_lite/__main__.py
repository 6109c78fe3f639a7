"""``python -m aiokafka_lite``: the same tool as the ``aiokafka-lite`` console script."""

from aiokafka_lite.cli import main

raise SystemExit(main())
