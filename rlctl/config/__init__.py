"""The typed recipe: sections, loading with precedence, cross-field checks, derived numbers.

Entry point: :func:`rlctl.config.pipeline.load_recipe` -> :class:`rlctl.config.loaded.LoadedRecipe`
or :class:`rlctl.config.problems.ConfigError`. Modules, in the order a recipe meets them:

* ``recipe`` - the section models; ``derived`` - batch arithmetic;
* ``sources`` - recipe files, ``RLCTL_*`` env, ``-s`` overrides -> layers;
* ``merge`` - deep merge with provenance; ``loading`` / ``validation`` - sections -> problems;
* ``plugin_options`` - registry names and their ``options`` tables;
* ``checks`` - cross-field checks and ``validate_config`` hooks;
* ``pipeline`` - ``load_recipe`` / ``validate_recipe``: every stage, in order;
* ``loaded`` / ``render`` - the result, shown as TOML or JSON;
* ``schema`` / ``reference`` - JSON Schema and ``docs/config.md``.

Nothing is imported here, so ``import rlctl.config.recipe`` stays cheap.
"""
