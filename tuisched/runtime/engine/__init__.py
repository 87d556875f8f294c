"""The engine: fires slots through APScheduler, queues runs, runs them, records every step."""
