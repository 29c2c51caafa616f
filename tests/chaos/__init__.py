"""Chaos tests: real gateway replicas killed and drained under load (bench/chaos.py drives them)."""
