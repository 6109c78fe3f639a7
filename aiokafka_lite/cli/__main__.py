"""``python -m aiokafka_lite.cli``: the same tool as the ``aiokafka-lite`` console script."""

from aiokafka_lite.cli.entry import main

raise SystemExit(main())
