"""Run ids stay unique across processes forked from one another."""

from __future__ import annotations

import os

from tuisched.domain.runs import new_run_id


def test_a_forked_child_draws_other_ids_than_its_parent() -> None:
    """A process forked after the ids' generator was made (the hosting console's
    scheduler, a preloaded interpreter's child) must not repeat its parent's ids."""
    new_run_id()  # the generator is made and used before the fork
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, then out at once
        os.close(read)
        os.write(write, " ".join(new_run_id() for _ in range(4)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    parent = [new_run_id() for _ in range(4)]
    assert len(child) == 4
    assert not set(child) & set(parent), (child, parent)
