"""Agent recipes: loops get the tools / environment they use, names and options are checked."""

from __future__ import annotations

from tests.config.config_helpers import BASE

TOOL = BASE + '[rollout]\nagent_loop = "tool"\ntool_parser = "compact"\n'


def paths(problems):
    return [p.path for p in problems]


def test_the_tool_loop_needs_tools_and_single_turn_takes_none(problems, load):
    (p,) = problems(TOOL)
    assert p.path == "rollout.tools" and "needs tools" in p.message
    load(TOOL + '[[rollout.tools]]\nname = "lookup"\n')
    got = problems(BASE + '[[rollout.tools]]\nname = "lookup"\n')
    assert paths(got) == ["rollout.tools"] and "does not use" in got[0].message


def test_unknown_tools_and_bad_tool_options_name_their_key_path(problems):
    got = problems(TOOL + '[[rollout.tools]]\nname = "lookpu"\n')
    assert paths(got) == ["rollout.tools[0].name"] and "lookup" in got[0].fix
    got = problems(TOOL + '[[rollout.tools]]\nname = "lookup"\noptions = {keys = "x"}\n')
    assert paths(got) == ["rollout.tools[0].options.keys"]


def test_agent_loop_options_are_validated_by_the_loops_model(problems, load):
    got = problems(
        TOOL + '[[rollout.tools]]\nname = "lookup"\n[rollout.agent_loop_options]\nmax_turns = 0\n'
    )
    assert paths(got) == ["rollout.agent_loop_options.max_turns"]
    got = problems(BASE + "[rollout.agent_loop_options]\nmax_turns = 2\n")
    assert paths(got) == ["rollout.agent_loop_options"] and "takes no options" in got[0].message


def test_the_env_loop_needs_a_registered_environment(problems, load):
    env = BASE + '[rollout]\nagent_loop = "env"\n'
    assert paths(problems(env)) == ["rollout.environment"]
    got = problems(env + '[rollout.environment]\nname = "guess"\n')
    assert paths(got) == ["rollout.environment.name"] and "guess_digit" in got[0].fix
    load(env + '[rollout.environment]\nname = "guess_digit"\noptions = {high = 7}\n')


def test_compact_calls_offer_one_tool_and_openai_agent_needs_its_function(problems):
    got = problems(
        TOOL + '[[rollout.tools]]\nname = "lookup"\n[[rollout.tools]]\nname = "calculator"\n'
    )
    assert paths(got) == ["rollout.tool_parser"]
    got = problems(CHAT + '[rollout]\nagent_loop = "openai_agent"\n')
    assert paths(got) == ["rollout.agent_loop_options.agent"]


CHAT = BASE + '[model]\npath = "tiny-chat"\n'
OPENAI = CHAT + '[rollout]\nagent_loop = "openai_agent"\n[rollout.agent_loop_options]\n'


def test_an_agent_function_that_does_not_exist_fails_at_validate(problems, load):
    openai = OPENAI
    got = problems(openai + 'agent = "rlctl.agents.openai_loop:sovle"\n')
    assert paths(got) == ["rollout.agent_loop_options.agent"]
    assert "has no attribute 'sovle'" in got[0].message
    got = problems(openai + 'agent = "no_such_package.agents:solve"\n')
    assert paths(got) == ["rollout.agent_loop_options.agent"]
    assert "no_such_package" in got[0].message
    got = problems(openai + 'agent = "not a target"\n')  # the option model's pattern says why
    assert paths(got) == ["rollout.agent_loop_options.agent"]
    load(openai + 'agent = "tests.agents.agent_functions:two_turns"\n')  # async: no problem


def test_an_agent_that_is_not_an_async_function_fails_at_validate(problems, tmp_path,
                                                                  monkeypatch):
    got = problems(OPENAI + 'agent = "os:system"\n')  # a module already imported
    assert paths(got) == ["rollout.agent_loop_options.agent"]
    assert "plain (not async) function" in got[0].message and "async def" in got[0].fix
    # a module not imported yet: read, not run
    (tmp_path / "sync_agents_i28.py").write_text(
        "raise SystemExit('never imported by validate')\n"
        "def solve(client, record):\n    return 1.0\n"
        "class Solver:\n    pass\n"
        "async def fine(client, record):\n    return 1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    got = problems(OPENAI + 'agent = "sync_agents_i28:solve"\n')
    assert paths(got) == ["rollout.agent_loop_options.agent"] and "not async" in got[0].message
    got = problems(OPENAI + 'agent = "sync_agents_i28:Solver"\n')
    assert "a class" in got[0].message


def test_openai_agent_needs_a_model_with_a_chat_template(problems, load, tmp_path):
    agent = 'agent = "tests.agents.agent_functions:two_turns"\n'
    got = problems(BASE + '[rollout]\nagent_loop = "openai_agent"\n'
                   '[rollout.agent_loop_options]\n' + agent)
    assert paths(got) == ["model.path"] and "chat template" in got[0].message
    assert "tiny-chat" in got[0].fix
    plain = tmp_path / "plain-tokenizer"
    plain.mkdir()
    (plain / "tokenizer_config.json").write_text('{"model_max_length": 64}')
    got = problems(OPENAI.replace('path = "tiny-chat"', 'path = "tiny-chat"\n'
                                  f'tokenizer = "{plain}"') + agent)
    assert paths(got) == ["model.tokenizer"]
    load(OPENAI + agent)


def test_loops_get_the_options_validated_at_load(load):
    from rlctl.agents.builtin_envs import GuessDigitOptions
    from rlctl.agents.env_loop import EnvLoopOptions
    from rlctl.models.tiny import build_tiny_tokenizer
    from rlctl.registry import build_registry
    from rlctl.trainer.worker.rollout_worker import build_agent_loop

    loaded = load(BASE + '[rollout]\nagent_loop = "env"\n[rollout.agent_loop_options]\n'
                  'max_turns = 2\n[rollout.environment]\nname = "guess_digit"\n'
                  'options = {high = 7}\n')
    loop = build_agent_loop(loaded, build_registry(external="none"), build_tiny_tokenizer())
    assert loop.options is loaded.options_for("rollout.agent_loop_options")
    assert isinstance(loop.options, EnvLoopOptions) and loop.options.max_turns == 2
    assert loop.env_options is loaded.options_for("rollout.environment.options")
    assert isinstance(loop.env_options, GuessDigitOptions) and loop.env_options.high == 7
