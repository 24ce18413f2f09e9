"""`teardown-check` and its tool: what giving a box back would lose."""

from .box import PROFILE_TIP
from .common import ALL, JSON, VERBOSE
from .model import CHOICE, LIST, READS, TEXT, Param, Tool, Verb, a

# gpuops.profiles.VERBS, which tests/test_surface.py holds this to: importing the profiles here
# would cost `gpuops --help` and every light verb their TOML loader
TEARDOWN_VERBS = ("stop", "pause", "destroy")
TEARDOWN = Verb("teardown-check", "Check", READS, line="before giving a box back: is what you keep pulled?",
                examples=("gpuops teardown-check --profile autodl",), connects=False,
                op="gpuops.ops.teardown:teardown_check", render="gpuops.render.teardown:render",
                doc="Before giving a box back: what gets deleted, and is every kept path pulled and verified? "
                    "Exit 1 if not.", params=(
    Param("host", TEXT, "the box, named as it was when pulling (the pull index is keyed by it)",
          tip="the box, named as when its outputs were pulled"),
    Param("profile", TEXT, "platform profile: decides what the verb deletes (see `gpuops profiles`)",
          tip=PROFILE_TIP),
    Param("keep", LIST, "path on the box you need after teardown: absolute, or relative to the login home "
                        "(repeatable)", tip="paths on the box you need afterwards: absolute, or relative to the login "
                                            "home"),
    Param("verb", CHOICE, "stop (the platform's meter-stop verb, default), pause, or destroy", default="stop",
          tip="what is about to happen to the box", choices=TEARDOWN_VERBS),
    JSON,
    ALL,
    VERBOSE,
), tools=(
    Tool("teardown_check", "teardown-check", "data", READS, "What a teardown would lose",
         "Before stopping a box: what its platform deletes, and is each kept path pulled and verified.", findings=True,
         local=True, args=(a("host", required=True), a("profile", required=True), a("keep"), a("verb")),
         data="profile:s verb:s meter_stop_verb:s deletes:a still_bills:s? keeps:a", typed=("deletes", "still_bills")),
))

VERBS = (TEARDOWN,)
