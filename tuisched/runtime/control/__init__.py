"""The control seam: the only part of the runtime a front end may use.

```
SchedulerControl     the protocol: queries, commands and events (seam.py)
├── LocalControl     over a scheduler in this process (local.py)
├── RemoteControl    over another process's scheduler, through its socket (remote.py)
└── OfflineControl   over the files a stopped scheduler left (offline.py)
ControlServer        serves a scheduler's seam on state_dir/control.sock (server.py)
LocalScheduler       a scheduler hosted by a front end: start, control, stop (host.py)
```

Front ends import this package and the domain; an import-linter contract
forbids them the runtime's insides.
"""

from tuisched.domain.errors import AlreadyRunningError, SchedulerNotRunningError
from tuisched.runtime.control.cluster import cluster_history, cluster_nodes, cluster_stats
from tuisched.runtime.control.files import control_socket, read_config
from tuisched.runtime.control.host import LocalScheduler
from tuisched.runtime.control.local import LocalControl
from tuisched.runtime.control.offline import OfflineControl
from tuisched.runtime.control.remote import RemoteControl, describe_client, scheduler_answers
from tuisched.runtime.control.seam import (
    AUDIT_LINES,
    OUTPUT_CHUNK_BYTES,
    SchedulerControl,
    Subscription,
)
from tuisched.runtime.control.server import PROTOCOL, socket_path
from tuisched.runtime.handlers.actions import who
from tuisched.runtime.pgdriver import DriverMissingError, require_driver

__all__ = [
    "AUDIT_LINES",
    "OUTPUT_CHUNK_BYTES",
    "PROTOCOL",
    "AlreadyRunningError",
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
    "read_config",
    "require_driver",
    "scheduler_answers",
    "socket_path",
    "who",
]
