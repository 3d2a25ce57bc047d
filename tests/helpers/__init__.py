"""Test helpers shared across the test packages (tests/ is on sys.path through tests/conftest.py)."""
