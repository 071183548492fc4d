"""One piece in isolation: no Ray, no `dac` child process, no training run. A package, so
that a test file may share its name with one in tests/e2e (pytest imports this one as
unit.test_NAME)."""
