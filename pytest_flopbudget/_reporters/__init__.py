"""Reporters turn Reports and verdicts into text for people and tools: terminal, GitHub, GitLab, JSON."""
