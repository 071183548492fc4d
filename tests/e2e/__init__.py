"""Ray, the `dac` CLI in a child process, training, tuning, run directories end to end. A
package, so that a test file may share its name with one in tests/unit (pytest imports
this one as e2e.test_NAME)."""
