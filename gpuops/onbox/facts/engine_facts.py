"""On-box facts of an engine's cluster, for preflight: what the engine named in argv[0] sees from
this host (gpuops.onbox.engines.registry: an engine's optional cluster_facts). Entry: main(argv). Reads
only; an engine with nothing to say answers {}."""

from ..engines import registry
from ..host import jobrecord


def facts(opts) -> dict:
    engine = registry.named(opts.get("engine"))
    gather = getattr(engine, "cluster_facts", None)
    return {"engine": engine.NAME, "facts": gather() if gather else {}}


def main(argv):
    return jobrecord.serve({"facts": facts}, argv)
