"""Hyperparameter search (`dac tune`) on Ray Tune: the space and its checks
(search_space.py, experiment_spec.py, no Ray), one trial as a training run (trial.py), the
search on Tune (experiment.py), and the outputs (results.py)."""
