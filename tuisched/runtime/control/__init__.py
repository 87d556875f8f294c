"""The control seam: the only part of the runtime a front end may use.

```
SchedulerControl     the protocol: queries, commands and events (seam.py)
├── LocalControl     over a scheduler in this process (local.py)
├── RemoteControl    over another process's scheduler, through its socket (remote.py)
└── OfflineControl   over the files a stopped scheduler left (offline.py)
BlockingControl      the seam without an event loop, for the command line (blocking.py)
ControlServer        serves a scheduler's seam on state_dir/control.sock (server.py)
LocalScheduler       a scheduler hosted by a front end: start, control, stop (host.py)
```

Front ends import this package and the domain; an import-linter contract
forbids them the runtime's insides.

Each name loads its module when it is first used (PEP 562), so a command line
verb that uses `BlockingControl` loads neither the scheduler nor aiohttp:
`from tuisched.runtime.control import BlockingControl` imports `blocking.py`
and what it needs, nothing else. Type checkers read the imports below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuisched.runtime.lazy import lazy_names

if TYPE_CHECKING:
    from tuisched.domain.errors import (
        AlreadyRunningError,
        DriverMissingError,
        SchedulerNotRunningError,
    )
    from tuisched.runtime.control.blocking import BlockingControl
    from tuisched.runtime.control.cluster import cluster_history, cluster_nodes, cluster_stats
    from tuisched.runtime.control.files import read_config
    from tuisched.runtime.control.host import LocalScheduler
    from tuisched.runtime.control.local import LocalControl
    from tuisched.runtime.control.offline import OfflineControl, offline_control
    from tuisched.runtime.control.protocol import (
        PROTOCOL,
        control_socket,
        describe_client,
        scheduler_answers,
        socket_path,
    )
    from tuisched.runtime.control.remote import RemoteControl
    from tuisched.runtime.control.seam import (
        AUDIT_LINES,
        OUTPUT_CHUNK_BYTES,
        SchedulerControl,
        Subscription,
    )
    from tuisched.runtime.handlers.actions import who
    from tuisched.runtime.importcheck import python_job_problems
    from tuisched.runtime.pgdriver import require_driver

_HOMES = {
    "AUDIT_LINES": "tuisched.runtime.control.seam",
    "OUTPUT_CHUNK_BYTES": "tuisched.runtime.control.seam",
    "PROTOCOL": "tuisched.runtime.control.protocol",
    "AlreadyRunningError": "tuisched.domain.errors",
    "BlockingControl": "tuisched.runtime.control.blocking",
    "DriverMissingError": "tuisched.domain.errors",
    "LocalControl": "tuisched.runtime.control.local",
    "LocalScheduler": "tuisched.runtime.control.host",
    "OfflineControl": "tuisched.runtime.control.offline",
    "offline_control": "tuisched.runtime.control.offline",
    "RemoteControl": "tuisched.runtime.control.remote",
    "SchedulerControl": "tuisched.runtime.control.seam",
    "SchedulerNotRunningError": "tuisched.domain.errors",
    "Subscription": "tuisched.runtime.control.seam",
    "cluster_history": "tuisched.runtime.control.cluster",
    "cluster_nodes": "tuisched.runtime.control.cluster",
    "cluster_stats": "tuisched.runtime.control.cluster",
    "control_socket": "tuisched.runtime.control.protocol",
    "describe_client": "tuisched.runtime.control.protocol",
    "python_job_problems": "tuisched.runtime.importcheck",
    "read_config": "tuisched.runtime.control.files",
    "require_driver": "tuisched.runtime.pgdriver",
    "scheduler_answers": "tuisched.runtime.control.protocol",
    "socket_path": "tuisched.runtime.control.protocol",
    "who": "tuisched.runtime.handlers.actions",
}
"""Where each name of the package lives."""

__all__ = [
    "AUDIT_LINES",
    "OUTPUT_CHUNK_BYTES",
    "PROTOCOL",
    "AlreadyRunningError",
    "BlockingControl",
    "DriverMissingError",
    "LocalControl",
    "LocalScheduler",
    "OfflineControl",
    "RemoteControl",
    "SchedulerControl",
    "SchedulerNotRunningError",
    "Subscription",
    "cluster_history",
    "cluster_nodes",
    "cluster_stats",
    "control_socket",
    "describe_client",
    "offline_control",
    "python_job_problems",
    "read_config",
    "require_driver",
    "scheduler_answers",
    "socket_path",
    "who",
]


__getattr__, __dir__ = lazy_names(__name__, _HOMES)
