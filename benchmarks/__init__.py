"""Performance harnesses, run by hand (not tests): ``python -m benchmarks --help``."""
