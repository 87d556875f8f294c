"""tuisched: a job scheduler you run, watch and steer from a terminal."""

__version__ = "0.1.0.dev0"
