"""Plugins installed as pip would (a dist-info and its modules on ``sys.path``), as in the
registry tests."""

from tests.registry.conftest import install  # noqa: F401 - re-exported as a fixture
