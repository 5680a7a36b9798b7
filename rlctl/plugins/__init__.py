"""Built-in plugins. Each module registers through :mod:`rlctl.hookspecs` exactly like a
third-party package would; heavy implementations are registered as lazy ``module:attr``
strings so that loading the registry never imports torch or ray."""
