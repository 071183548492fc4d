"""Fixed players for two-player board games, the baselines self-play is measured against.

`random`: a uniformly random legal move, for any game with an action mask.
`greedy`: for PettingZoo's tic-tac-toe and connect four (told by their observation's
shape, planes [H, W, 2]: the mover's pieces, then the other player's): a move that wins
now, else one that stops the other player's win on their next move, else a random legal
move. No TensorFlow or Ray here.
"""

from __future__ import annotations

import numpy as np

from distributed_ac.core.errors import EnvError

BASELINES = ("random", "greedy")
# planes' shape -> (name, pieces in a row that win, whether a move names a column)
GAMES = {(3, 3, 2): ("tic-tac-toe", 3, False), (6, 7, 2): ("connect four", 4, True)}


def check_greedy(obs_shape: tuple[int, ...], env: str) -> None:
    if tuple(obs_shape) not in GAMES:
        raise EnvError(f"the greedy player knows tic-tac-toe and connect four, not '{env}' "
                       "(its observation planes are another shape); use the random one")


def random_moves(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random legal action for each row of masks [B, actions]."""
    scores = rng.random(masks.shape) + masks.astype(np.float64)  # legal ones score > 1
    return scores.argmax(axis=1)


def greedy_moves(planes: np.ndarray, masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The greedy player's action for each row of planes [B, H, W, 2] and masks [B, A]."""
    _, k, columns = GAMES[planes.shape[1:]]
    fallback = random_moves(masks, rng)
    out = fallback.copy()
    for b in range(len(planes)):
        legal = np.flatnonzero(masks[b])
        mine, theirs = planes[b, ..., 0] > 0, planes[b, ..., 1] > 0
        win = [a for a in legal if _wins(mine, _cell(mine | theirs, a, columns), k)]
        block = [a for a in legal if _wins(theirs, _cell(mine | theirs, a, columns), k)]
        pick = win or block
        if pick:
            out[b] = pick[rng.integers(len(pick))]
    return out


def _cell(taken: np.ndarray, action: int, columns: bool) -> tuple[int, int]:
    """The square a move fills: a connect-four piece drops to its column's lowest empty row."""
    if not columns:
        return divmod(int(action), taken.shape[1])
    rows = np.flatnonzero(~taken[:, action])
    return int(rows[-1]), int(action)


def _wins(pieces: np.ndarray, cell: tuple[int, int], k: int) -> bool:
    """Whether `pieces` with `cell` added hold k in a row through that cell."""
    h, w = pieces.shape
    r0, c0 = cell
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        run = 1
        for sign in (1, -1):
            r, c = r0 + sign * dr, c0 + sign * dc
            while 0 <= r < h and 0 <= c < w and pieces[r, c]:
                run += 1
                r, c = r + sign * dr, c + sign * dc
        if run >= k:
            return True
    return False
