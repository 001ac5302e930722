"""Integrations with HTTP clients, MCP and agent frameworks.

Each module imports its library when it is imported, not before: ``import candor`` works
without any of them. Install them with the extras: ``candor-adapter[httpx]``,
``candor-adapter[requests]``, ``candor-adapter[mcp]`` (the client, :mod:`.mcp`, and the server
tools, :mod:`.mcp_server`), ``candor-adapter[pydantic-ai]`` and ``candor-adapter[langchain]``.

The HTTP and MCP client integrations make calls; :mod:`.pydantic_ai`, :mod:`.langchain` and
:mod:`.mcp_server` declare tools whose result gives the model the call's class and summary.
"""
