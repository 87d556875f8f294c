"""Schedule math: durations, crontab(5) expressions, slots of every schedule form, words."""
