"""The learner: TensorFlow networks, losses, advantage estimators, distributions and
the update. Never Ray."""
