"""``rlctl config migrate``: a verl config plus its Hydra overrides -> an rlctl recipe and a report.

Modules, in the order a migration meets them:

* ``shell`` - the arguments of a launch script's ``verl.trainer.main_ppo`` call (line
  continuations, quotes, the script's own variables; unknown variables are reported);
* ``verl_config`` - verl's composed YAML with the overrides applied the way Hydra applies
  them, interpolations resolved, flattened to leaf keys;
* ``ledger`` - what became of every verl key (mapped / dropped / ignored / error) and the
  rlctl values written, each with the verl keys it came from;
* ``translate_algorithm``, ``translate_engines`` - the mapping (batch semantics, losses, KL,
  optimizer, critic; engines, model, data, schedule, logging);
* ``rules`` - keys with no effect here, or only at a neutral value (a glob table);
* ``report`` / ``write`` - the report text and the commented recipe TOML;
* ``run`` - :func:`migrate`, which ties them together.

No torch, ray or transformers: this runs in the CLI process.
"""
