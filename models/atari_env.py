"""A small Pong-like environment that stands in for Atari 2600 Pong in the A3C workload.

No gym, no ROM: a paddle-and-ball game in numpy, deterministic per seed, that produces what A3C's
network reads after the usual Atari preprocessing (Mnih et al., "Human-level control through deep
reinforcement learning", Nature 2015, Methods): grey 84x84 uint8 frames, the last 4 stacked. It
keeps Pong's shape of the problem: the minimal action set of 6 actions that ALE gives Pong, a
reward of +1 / -1 when a point is won / lost, and an episode that ends when one side reaches 21
points. One step renders one frame (no frame skip: a "frame" here is one agent step).

It is meant to cost little (tens of microseconds a step, a few small numpy slice writes) so
that a profile of the A3C workload shows the model's ops, not the environment.
"""

from __future__ import annotations

import numpy as np

from tbd.core.errors import UsageError

#: ALE's minimal action set for Pong, in ALE's order; RIGHT moves the paddle up, LEFT down.
ACTIONS = ("NOOP", "FIRE", "RIGHT", "LEFT", "RIGHTFIRE", "LEFTFIRE")
_MOVE = (0, 0, -1, 1, -1, 1)  # paddle direction per action, in rows (up is -1)

#: Grey levels of Pong's frame after ALE's RGB -> luminance conversion (approximately): brown
#: background, the two paddles, white ball and walls.
BACKGROUND, OPPONENT, PLAYER, WHITE = 87, 123, 147, 236

#: Geometry and speeds for an 84-pixel frame, in pixels and pixels per frame; scaled with the side.
_WALL, _PADDLE_H, _PADDLE_W, _BALL, _MARGIN = 2, 8, 2, 2, 4
_PLAYER_SPEED, _OPPONENT_SPEED, _BALL_VX, _BALL_VY_MAX = 2.5, 1.0, 1.5, 2.0


class PaddleBallEnv:
    """Pong-like game: the agent's paddle on the right, a ball-tracking opponent on the left.

    Args:
        seed: fixes the ball's serves (an int or a SeedSequence); the same seed and actions give
            the same frames.
        side: frame height and width in pixels (84 as in DQN/A3C preprocessing; smaller for tests).
        stack: frames stacked in an observation (4 in DQN/A3C).
        points_to_win: the episode ends when either side reaches it (21 in Pong).
    """

    num_actions = len(ACTIONS)

    def __init__(self, seed: int | np.random.SeedSequence, side: int = 84, stack: int = 4, points_to_win: int = 21):
        if side < 16 or stack < 1 or points_to_win < 1:
            raise UsageError(f"bad environment shape: side {side} (>= 16), stack {stack} (>= 1), "
                             f"points_to_win {points_to_win} (>= 1)")
        self.side, self.points_to_win = side, points_to_win
        self._scale = side / 84
        self._rng = np.random.default_rng(seed)
        self._stack = np.empty((stack, side, side), dtype=np.uint8)
        self._paddle_h = max(2, round(_PADDLE_H * self._scale))
        self._ball = max(1, round(_BALL * self._scale))
        self._wall = max(1, round(_WALL * self._scale))
        self._player_x = side - round(_MARGIN * self._scale) - _PADDLE_W  # left column of the paddle
        self._opponent_x = round(_MARGIN * self._scale)
        self.episodes = 0  # completed episodes
        self.reset()

    @property
    def observation(self) -> np.ndarray:
        """The last `stack` frames, oldest first: uint8 [stack, side, side], grey levels 0..255.

        A view of the environment's own buffer, overwritten by the next step: copy it to keep it.
        """
        return self._stack

    def reset(self) -> np.ndarray:
        """Start a new episode (0:0, paddles centred, a fresh serve); the stack holds its first frame."""
        self.score = [0, 0]  # [opponent, player]
        middle = (self.side - self._paddle_h) / 2
        self._player_y = self._opponent_y = middle
        self._serve()
        self._render(self._stack[-1])
        self._stack[:-1] = self._stack[-1]  # as the usual wrappers do: the first frame repeated
        return self._stack

    def step(self, action: int) -> tuple[float, bool]:
        """Advance one frame under `action` (an index into ACTIONS).

        Returns:
            (reward, episode_ended): reward +1 when the agent wins a point, -1 when it loses one,
            else 0. When the episode ends the environment has already reset, so `observation` is
            the next episode's first stack.
        """
        s, lo, hi = self._scale, float(self._wall), float(self.side - self._wall - self._paddle_h)
        self._player_y = min(hi, max(lo, self._player_y + _MOVE[action] * _PLAYER_SPEED * s))
        # The opponent follows the ball at a capped speed, so a steep ball can beat it.
        gap = (self._ball_y + self._ball / 2) - (self._opponent_y + self._paddle_h / 2)
        self._opponent_y = min(hi, max(lo, self._opponent_y + max(-1.0, min(1.0, gap)) * _OPPONENT_SPEED * s))
        reward = self._move_ball()
        if reward:
            self.score[reward > 0] += 1
            if max(self.score) >= self.points_to_win:
                self.episodes += 1
                self.reset()
                return reward, True
            self._serve()
        self._stack[:-1] = self._stack[1:]
        self._render(self._stack[-1])
        return reward, False

    def _serve(self) -> None:
        s = self._scale
        self._ball_x = self._ball_y = (self.side - self._ball) / 2
        self._vx = _BALL_VX * s * (1 if self._rng.random() < 0.5 else -1)
        self._vy = self._rng.uniform(-0.75, 0.75) * _BALL_VY_MAX * s

    def _move_ball(self) -> float:
        """Move the ball one frame; bounce off walls and paddles. Returns the point's reward."""
        top, bottom = float(self._wall), float(self.side - self._wall - self._ball)
        x, y = self._ball_x + self._vx, self._ball_y + self._vy
        if y < top or y > bottom:  # reflect off the top/bottom wall
            y = 2 * (top if y < top else bottom) - y
            self._vy = -self._vy
        if self._vx > 0 and self._ball_x + self._ball <= self._player_x < x + self._ball:
            x = self._bounce(x, y, self._player_y, self._player_x - self._ball)
        elif self._vx < 0 and x < self._opponent_x + _PADDLE_W <= self._ball_x:
            x = self._bounce(x, y, self._opponent_y, self._opponent_x + _PADDLE_W)
        self._ball_x, self._ball_y = x, y
        if x > self.side:
            return -1.0  # past the agent's paddle
        if x + self._ball < 0:
            return 1.0
        return 0.0

    def _bounce(self, x: float, y: float, paddle_y: float, face_x: float) -> float:
        """x after meeting a paddle's face: reflected if the ball overlaps the paddle, else unchanged."""
        if y + self._ball <= paddle_y or y >= paddle_y + self._paddle_h:
            return x  # missed; the ball flies past
        self._vx = -self._vx
        # Spin: where the ball meets the paddle steers it, as in Pong.
        offset = (y + self._ball / 2 - paddle_y - self._paddle_h / 2) / (self._paddle_h / 2)
        limit = _BALL_VY_MAX * self._scale
        self._vy = max(-limit, min(limit, self._vy + 0.75 * offset * limit))
        return 2 * face_x - x

    def _render(self, frame: np.ndarray) -> None:
        w, b, h = self._wall, self._ball, self._paddle_h
        frame.fill(BACKGROUND)
        frame[:w] = WHITE
        frame[-w:] = WHITE
        oy, py = round(self._opponent_y), round(self._player_y)
        frame[oy:oy + h, self._opponent_x:self._opponent_x + _PADDLE_W] = OPPONENT
        frame[py:py + h, self._player_x:self._player_x + _PADDLE_W] = PLAYER
        bx, by = round(self._ball_x), round(self._ball_y)
        frame[max(by, 0):by + b, max(bx, 0):max(bx + b, 0)] = WHITE
