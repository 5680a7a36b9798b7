"""What every server-mode rollout engine shares: process launch, HTTP client, base engine, env
lookup."""
