"""Test suites rlctl offers to plugin authors (import the one you need; they use pytest)."""
