"""Bus subscribers that turn events into side effects: triggers, alerts, the audit log."""
