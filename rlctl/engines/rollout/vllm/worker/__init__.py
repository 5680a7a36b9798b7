"""Code that runs inside vLLM servers, not in rlctl's process.

This directory (not the package) goes on a vLLM server's ``PYTHONPATH``, so that vLLM imports
``rlctl_vllm_ext`` as a top-level module in its own environment. The ``__init__`` only makes
setuptools ship the directory with rlctl; do not import ``rlctl_vllm_ext`` from rlctl (it needs
vllm).
"""
