"""Benchmarks: ``python -m h5gds.bench whole,loader --dir DIR --out OUT``."""
