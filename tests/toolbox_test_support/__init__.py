"""Support code shared by the test suites (not a test module)."""
