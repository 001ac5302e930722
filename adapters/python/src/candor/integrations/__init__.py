"""Integrations with HTTP clients and MCP.

Each module imports its client library when it is imported, not before: ``import candor``
works without any of them. Install them with the extras: ``candor-adapter[httpx]``,
``candor-adapter[requests]``, ``candor-adapter[mcp]``.
"""
