"""Glue between the plugins and data or other tools.

Each adapter module imports what it needs on its own, so importing one never pulls in an
ecosystem the user did not ask for.
"""
