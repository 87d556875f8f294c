"""The configuration: YAML with line numbers, validated into a `Config`, diffs, dependencies."""
