"""Performance benchmarks of tuisched, run by hand (never by pytest). See docs/benchmarks.md."""
