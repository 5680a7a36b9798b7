"""Metadata that travels between the controller and workers (no tensors, no torch import)."""

from rlctl.protocol.kv import KeyFormatError, KVBatchMeta, make_key, new_uid, parse_key

__all__ = ["KVBatchMeta", "KeyFormatError", "make_key", "new_uid", "parse_key"]
