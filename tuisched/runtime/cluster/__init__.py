"""Cluster mode (SPEC R21, CLUSTER.md): nodes sharing one PostgreSQL database.

`database` connects (asynchronously, with bounded waits), explains a failure
in one line, and applies the schema's migrations (`schema`) once however
many nodes start together.
"""
