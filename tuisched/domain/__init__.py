"""Layer 0, the domain: what a job, a run, a slot and a configuration are.

Pure: no I/O, no asyncio, no subprocesses, no Textual, no scheduler object.
Every function that needs the time takes it as a parameter.
"""
