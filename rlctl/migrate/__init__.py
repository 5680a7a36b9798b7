"""``rlctl config migrate``: a verl config plus its Hydra overrides -> an rlctl recipe and a report.

Modules, in the order a migration meets them:

* ``inputs`` - reading the script, the overrides file and the YAML safely (regular UTF-8
  files, bounded YAML, no tags);
* ``shell`` (with ``shell_words``, ``shell_conditions``) - the arguments of a launch script's
  ``verl.trainer.main_ppo`` call: the script parsed with tree-sitter's bash grammar and walked
  like bash (arrays, ``if`` / ``case``, functions), nothing run; unknown variables are reported;
* ``verl_release`` - verl's defaults per release (``verl_defaults/*.yaml``, derived from
  verl's generated configs) and which release a config comes from;
* ``verl_sources`` - the config a run starts from (``--config-name``, ``model_engine=...``)
  and the defaults it is compared with;
* ``verl_config`` - verl's composed YAML with the overrides applied the way Hydra applies
  them, interpolations resolved, flattened to leaf keys, each at verl's default or not;
* ``ledger`` - what became of every verl key (mapped / dropped / ignored / error) and the
  rlctl values written, each with the verl keys it came from; only the user's settings are
  refused;
* ``translate_algorithm``, ``translate_optim``, ``translate_engines``,
  ``translate_reward_model``, ``translate_dapo`` - the mapping (batch semantics, losses, KL,
  optimizer, critic; engines, model, data, schedule, logging; rewards, DAPO);
* ``rules`` - keys with no effect here, or only at a neutral value (a glob table);
* ``report`` / ``write`` - the report text and the commented recipe TOML;
* ``run`` - :func:`migrate`, which ties them together.

No torch, ray or transformers: this runs in the CLI process.
"""
