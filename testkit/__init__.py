"""Test doubles shared by tests and benchmarks; never installed with the product."""
