"""sglang engine tests. Helpers live in ``sglang_env.py`` (imported as a plain module by the tests).

The real-server tests are skipped unless SGLang's own environment is built
(``rlctl engines install sglang``); see ``sglang_env.py``.
"""
