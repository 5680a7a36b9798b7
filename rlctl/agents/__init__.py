"""Multi-turn agents: trajectories, tools, tool-call parsers, environments and a gateway.

* :mod:`.trajectory` - token in, token out: builds an output from the engine's own token
  ids plus observation tokens, with its ``loss_mask``.
* :mod:`.tools`, :mod:`.builtin_tools` - the ``tool`` plugin kind and its built-ins.
* :mod:`.tool_parsers` - reading tool calls out of a turn, rendering tool results.
* :mod:`.observation` - observation text -> token ids (chat-template deltas or plain text).
* :mod:`.tool_loop` - the ``tool`` agent loop.
* :mod:`.environment`, :mod:`.env_loop`, :mod:`.builtin_envs` - Gym-style environments
  and the ``env`` agent loop.
* :mod:`.gateway`, :mod:`.openai_loop` - an OpenAI-compatible gateway and the
  ``openai_agent`` loop that lets a user function drive an episode through it.

Nothing here is imported by the CLI (these modules run inside rollout workers).
"""
