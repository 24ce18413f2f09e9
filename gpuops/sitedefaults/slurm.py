"""A profile's [slurm]: a site's defaults for the Slurm jobs its login node submits (gpuops.engines.slurm)."""

import dataclasses

from ..tomlschema import field


@dataclasses.dataclass(frozen=True)
class SiteDefaults:
    """site defaults for jobs submitted to Slurm (module loads: launch.proxy_hook)"""

    partition: str = field("Slurm partition jobs go to unless --partition says (empty = the cluster's default)", "")
    account: str = field("Slurm account jobs are charged to unless --account says", "")
    qos: str = field("Slurm QOS jobs ask for unless --qos says", "")
    constraint: str = field("node features jobs ask for unless --constraint says", "")
    time: str = field("walltime jobs ask for unless --time says (Slurm's formats: 90, 1:30:00, 2-00:00:00)", "")


TABLE = SiteDefaults
