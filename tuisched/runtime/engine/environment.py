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
    return JobEnvironments().of(config, job, run)


class JobEnvironments:
    """`job_environment`, with the scheduler's own part read once per configuration.

    Copying `os.environ` decodes every variable: a tenth of a millisecond a
    run, more than the rest of a `/bin/true` run's work on the loop. The
    scheduler's environment does not change while a configuration is in force
    (its secrets are filtered by the configuration's names, whenever they
    leave `os.environ`).
    """

    def __init__(self) -> None:
        self._base: tuple[Config, dict[str, str]] | None = None

    def of(self, config: Config, job: Job, run: RunRecord) -> dict[str, str]:
        """The environment of `run` of `job` under `config` (see `job_environment`)."""
        env = dict(self._scheduler_part(config))
        if isinstance(job.kind, CommandSpec):
            env.update(job.kind.env)
        env["TUISCHED_JOB"] = job.name
        env["TUISCHED_RUN_ID"] = run.run_id
        env["TUISCHED_SLOT"] = run.slot.isoformat() if run.slot is not None else ""
        env["TUISCHED_NODE"] = run.node
        env["TUISCHED_FENCE"] = str(run.fence) if run.fence is not None else ""
        return env

    def _scheduler_part(self, config: Config) -> dict[str, str]:
        if self._base is None or self._base[0] is not config:
            hidden = secret_names(config)
            self._base = (config, {k: v for k, v in os.environ.items() if k not in hidden})
        return self._base[1]
