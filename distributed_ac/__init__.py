"""Distributed advantage actor-critic on Ray and TensorFlow.

Importing this package is cheap: it pulls in neither TensorFlow nor Ray, so rollout
workers stay light. Import the submodules you need.
"""

__version__ = "0.2.0"
