"""Online additive Holt-Winters (level + trend + season) for an evenly sampled series such as arrival rate.

Textbook recursions (Hyndman & Athanasopoulos, "Forecasting: Principles and Practice", section 8.3): with season
length m, level l, trend b, seasonal s:
    l_t = a (y_t - s_{t-m}) + (1 - a)(l_{t-1} + b_{t-1});  b_t = g (l_t - l_{t-1}) + (1 - g) b_{t-1}
    s_t = d (y_t - l_{t-1} - b_{t-1}) + (1 - d) s_{t-m};    y_{t+h} = l_t + h b_t + s_{t+h-m(k+1)}
Until a full season has been seen the seasonal terms are 0 (plain Holt).
"""
from __future__ import annotations


class HoltWinters:
    def __init__(self, season_length: int, alpha: float = 0.3, beta: float = 0.05, gamma: float = 0.3) -> None:
        if season_length < 1 or not (0 < alpha <= 1 and 0 <= beta <= 1 and 0 <= gamma <= 1):
            raise ValueError("season_length >= 1, 0 < alpha <= 1, 0 <= beta, gamma <= 1")
        self.m, self.a, self.b_w, self.g = season_length, alpha, beta, gamma
        self.level: float | None = None
        self.trend = 0.0
        self.season = [0.0] * season_length
        self.t = 0

    def update(self, y: float) -> None:
        i = self.t % self.m
        if self.level is None:
            self.level = y
        else:
            s_prev = self.season[i] if self.t >= self.m else 0.0
            last_level = self.level
            self.level = self.a * (y - s_prev) + (1 - self.a) * (last_level + self.trend)
            self.trend = self.b_w * (self.level - last_level) + (1 - self.b_w) * self.trend
            if self.t >= self.m:
                self.season[i] = self.g * (y - last_level - self.trend) + (1 - self.g) * s_prev
            else:
                self.season[i] = y - self.level
        self.t += 1

    def forecast(self, h: int) -> float:
        """Forecast h >= 1 samples ahead (0 before any data)."""
        if self.level is None:
            return 0.0
        season = self.season[(self.t + h - 1) % self.m] if self.t >= self.m else 0.0
        return self.level + h * self.trend + season
