"""IronClaw's rules that are pure functions: numbers, settings parsing, write rules.

Everything here restates a rule of IronClaw (ironclaw-v1.0.0) in memfs's own words and is
checked against the conformance vectors in ``tests/fixtures/ironclaw-vectors``.
"""
