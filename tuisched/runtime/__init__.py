"""Layer 1, the runtime: the scheduler and its parts (engine, execution, store, handlers).

No Textual. Front ends drive it through `tuisched.runtime.control` only.
"""
