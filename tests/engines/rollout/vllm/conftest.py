"""vllm engine tests. Helpers live in ``vllm_env.py`` (imported as a plain module by the tests).

The real-server tests are skipped unless vLLM's own environment is built
(``rlctl engines install vllm``); see ``vllm_env.py``.
"""
