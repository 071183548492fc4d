"""Acting: the rollout worker and the NumPy policy it acts with. NumPy only: never
TensorFlow or Ray, so a worker process stays small."""
