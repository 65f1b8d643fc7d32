"""Rolling model updates: replace a pool's instances in waves while the rest keep serving.

At `at_s`, for each listed pool (default: all), `wave_size` active instances are drained (nothing in flight is
dropped), then brought back with the new weights (load + warm-up, no provisioning); the next wave starts when
the previous one serves again. The capacity dip is visible in the time series.
"""
from __future__ import annotations

from inferplan.config.fleet import RollingPlan


class RollingUpdate:
    def __init__(self, env, pools: dict, plan: RollingPlan) -> None:
        self.env, self.pools = env, pools
        self.at_s, self.wave_size, self.targets = plan.at_s, plan.wave_size, list(plan.pools)
        self.log: list = []

    def start(self) -> None:
        self.env.process(self._run())

    def _run(self):
        yield self.env.timeout(self.at_s)
        for name in self.targets:
            pool = self.pools[name]
            old = list(pool.active)
            reload_s = pool.cold_start.total_s(pool.memory.weight_bytes, provision=False)
            for i in range(0, len(old), self.wave_size):
                wave = old[i:i + self.wave_size]
                self.log.append((float(self.env.now), name, [w.index for w in wave]))
                n_before = len(pool.instances)
                yield from pool.replace_wave(wave, reload_s)
                new = pool.instances[n_before:]
                yield from pool.wait_until(lambda: all(inst.state == "active" for inst in new))
