"""The keys a configuration file may hold, and the names it may use."""

from __future__ import annotations

import re

TOP_KEYS = frozenset({"settings", "email", "groups", "jobs", "webhooks"})
GROUP_KEYS = frozenset({"jobs", "alerts", "description"})
KIND_KEYS = ("command", "python", "wait_for")
COMMAND_KEYS = frozenset({"cwd", "env", "success_codes"})
PYTHON_KEYS = frozenset({"isolation"})
ISOLATIONS = ("process", "thread")
"""How a python job runs: in a child process of its own (default), or in a scheduler thread."""
JOB_KEYS = frozenset(KIND_KEYS) | COMMAND_KEYS | PYTHON_KEYS | frozenset(
    {
        "description", "schedule", "after", "priority", "timeout", "overlap", "retries",
        "retry_delay", "enabled", "timezone", "grace", "misfire", "requires", "wait_timeout",
        "recover", "alerts",
    }
)  # fmt: skip
SCHEDULE_KEYS = frozenset({"every", "cron", "at", "start", "stop"})
AFTER_KEYS = frozenset({"job", "on", "delay"})
SELF = "self"
"""In `requires`, the job itself: its own previous slot must have succeeded."""
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
"""A node's name, as it may name a folder."""
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:")
"""What job and group names are made of."""

# --- cron compatibility (issue 16) ---
JOB_KEYS = JOB_KEYS | frozenset({"jitter"})
"""`jitter`: a delay added to each slot of the job, reproducible per slot."""
