"""The official MCP conformance suite, run against the gateway in front of a legacy fixture server."""
