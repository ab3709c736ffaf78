"""Test helpers shared across test packages (the scripted OpenAI-compatible server)."""
