"""Metrics, health, logging and the HTTP endpoint that serves them (what an operator sees at 3 a.m.).

Import the submodules directly (``from schedctl.observability import metrics``); this package imports nothing
so that the CLI can load ``logging`` without paying for prometheus_client.
"""
