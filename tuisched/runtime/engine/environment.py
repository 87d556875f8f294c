"""The environment of a command run: the scheduler's, minus its secrets, plus the job's."""

from __future__ import annotations

import os

from tuisched.domain.model import CommandSpec, Config, Job
from tuisched.domain.runs import RunRecord
from tuisched.runtime.secrets import secret_names


def job_environment(config: Config, job: Job, run: RunRecord) -> dict[str, str]:
    """The environment of a run: the scheduler's minus its secrets, the job's `env`, our names.

    `TUISCHED_JOB`, `TUISCHED_RUN_ID` and `TUISCHED_SLOT` (ISO 8601, empty for
    a run started by hand) tell the job which run it is; `TUISCHED_NODE` which
    node runs it, and in cluster mode `TUISCHED_FENCE` the fencing number of the
    claim (downstream systems dedupe on it: a higher one supersedes).
    """
    hidden = secret_names(config)
    env = {key: value for key, value in os.environ.items() if key not in hidden}
    if isinstance(job.kind, CommandSpec):
        env.update(job.kind.env)
    env["TUISCHED_JOB"] = job.name
    env["TUISCHED_RUN_ID"] = run.run_id
    env["TUISCHED_SLOT"] = run.slot.isoformat() if run.slot is not None else ""
    env["TUISCHED_NODE"] = run.node
    env["TUISCHED_FENCE"] = str(run.fence) if run.fence is not None else ""
    return env
