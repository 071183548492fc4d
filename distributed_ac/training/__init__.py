"""The driver: start-up, the training loop (Trainer), stop signals and run state."""
