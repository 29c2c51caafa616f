"""Real MCP servers the tests run as subprocesses (see ``tests/conftest.py`` for the fixtures).

``legacy_fastmcp.py`` runs on ``mcp==1.30.0`` (``.venv-legacy``), ``native_mcpserver.py`` on
``mcp==2.3.0`` (``.venv``). They are scripts, not importable helpers: the two SDKs cannot share an
interpreter, so nothing here may be imported by the test process.
"""
