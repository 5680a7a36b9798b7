"""Benchmarks that ship with rlctl (``rlctl bench ...``)."""
