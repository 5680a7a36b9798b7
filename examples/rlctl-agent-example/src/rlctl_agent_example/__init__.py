"""An agent written with the OpenAI Agents SDK, trained with rlctl's ``openai_agent`` loop."""
