"""Running observation and return statistics, merged in the learner from batch moments.

Each batch contributes its own moments (count, mean, variance); `chan_merge` folds them
into the running ones with the parallel form of Welford's algorithm (Chan, Golub and
LeVeque 1979), which is exact: merging the moments of any split of a data set gives the
moments of the whole, in any order. Workers never update statistics themselves; they
get them from the learner inside the Weights bundle, so every worker and the learner
normalise with the same numbers for a given policy version.

- Observations (`normalize_obs`): x -> clip((x - mean) / sqrt(var + eps), -clip, clip),
  as VecNormalize and cleanRL's NormalizeObservation. The learner normalises each batch
  with its statistics before the batch, then merges the batch's real steps in (reset
  steps, copies of final observations, are left out). In sync mode those are the
  statistics the workers acted with, so an update stays exactly on-policy; in async
  mode they are newer by the batches merged since, which V-trace's ratios absorb. The statistics are part of the input pipeline, not of
  the networks: V_target's weights are still an exact copy of V's.
- Returns (`normalize_reward`): rewards divided by the standard deviation of the
  discounted return, as VecNormalize does (workers track each sub-env's discounted
  return and send its batch moments; nothing is subtracted, so the sign of a reward
  and the optimal policy stay as they were).

This module is NumPy only (workers import it); the learner's float64 tf.Variables that
hold the running moments are learning/normalizers.py's RunningMoments.
"""

from __future__ import annotations

import numpy as np

EPS = 1e-8


def chan_merge(n_a, mean_a, var_a, n_b, mean_b, var_b):
    """Moments of the union of two sets from each set's count, mean and (population)
    variance. Plain arithmetic: works on NumPy arrays and on tensors alike."""
    n = n_a + n_b
    delta = mean_b - mean_a
    mean = mean_a + delta * (n_b / n)
    m2 = var_a * n_a + var_b * n_b + delta * delta * (n_a * n_b / n)
    return n, mean, m2 / n


def moments(x: np.ndarray) -> np.ndarray:
    """[count, mean, var] of a 1-D sample (a batch's discounted returns); zeros if empty."""
    if x.size == 0:
        return np.zeros(3, np.float64)
    x = x.astype(np.float64)
    return np.array([x.size, x.mean(), x.var()])


def merge_all(stats: list[np.ndarray]) -> np.ndarray:
    """One [count, mean, var] from several (Batch.concat of return moments)."""
    out = np.zeros(3, np.float64)
    for s in stats:
        if s[0] > 0:
            out = s.copy() if out[0] == 0 else np.array(chan_merge(*out, *s))
    return out


def normalize_np(obs: np.ndarray, mean: np.ndarray, inv_std: np.ndarray, clip: float) -> np.ndarray:
    """The NumPy twin of learning/normalizers.ObsNormalizer.__call__ (float32 in, float32 out)."""
    return np.clip((obs - mean) * inv_std, -clip, clip, dtype=np.float32)
