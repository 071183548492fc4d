"""What every layer shares: Batch and Weights, normalisation, RNG state, errors,
child processes. No TensorFlow, no Ray."""
