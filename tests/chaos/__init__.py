"""Chaos scenarios: the client under injected network faults, with every record counted.

``python -m tests.chaos.run`` (``make chaos``) runs the full scenarios and prints the
table; ``tests/integration/test_chaos.py`` runs the short versions in the default suite.
"""
