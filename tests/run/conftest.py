"""The run tests build the trainer tests' tiny recipes (one fixture, defined once)."""

from tests.trainer.conftest import make_recipe  # noqa: F401 - re-exported as a fixture
