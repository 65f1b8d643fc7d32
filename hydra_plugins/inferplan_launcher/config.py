"""The `workers` launcher's config, stored in Hydra's ConfigStore as `hydra/launcher=workers` when Hydra scans
the `hydra_plugins` namespace."""

from dataclasses import dataclass
from typing import Optional

from hydra.core.config_store import ConfigStore


@dataclass
class WorkersLauncherConf:
    _target_: str = "hydra_plugins.inferplan_launcher.workers_launcher.WorkersLauncher"
    # worker processes (each imports the simulator once, then runs job after job); null = every core, 1 = the jobs
    # run one after another in this process
    workers: Optional[int] = None


ConfigStore.instance().store(group="hydra/launcher", name="workers", node=WorkersLauncherConf,
                             provider="inferplan")
