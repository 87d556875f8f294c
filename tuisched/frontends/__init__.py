"""Layer 2, the front ends: the command line, headless mode and the console."""
