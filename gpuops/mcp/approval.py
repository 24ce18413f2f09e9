"""A person's approval of a destructive plan, asked through the client where it can ask one.

An apply (`yes` with the `plan_id` a dry run showed, on a call that ends processes or deletes)
is the agent's decision under today's rule. A client that declared the elicitation capability
(form mode), on a connection that carries a server's request in the middle of a call (the
handshake-era protocol, up to 2025-11-25), can also put the plan before the person using it: the
server asks there, through MCP's elicitation, before anything is done, and a person who declines
or dismisses it leaves everything as it was (a `refused` error saying so). A client that cannot
ask, or one on the per-request protocol (2026-07-28), whose questions ride the SDK's resolvers
instead, keeps today's rule; the server's level (gpuops.mcp.toolsets) is checked before either.
"""

import json

from pydantic import BaseModel, Field

from .. import errors
from ..surface.model import ENDS

ASKED_CHARS = 300  # of the call's arguments shown to the person


class Approval(BaseModel):
    apply: bool = Field(description="apply this plan now")


def applies_a_plan(effect: str, arguments: dict) -> bool:
    """Whether this call applies a destructive plan (what a person may be asked about)."""
    return effect == ENDS and bool(arguments.get("yes")) and bool(arguments.get("plan_id"))


def can_ask(context) -> bool:
    """Whether the client declared form-mode elicitation (an empty capability means form) and the
    connection can carry a request from the server in the middle of a call: the handshake-era
    protocol (up to 2025-11-25) can; the per-request one (2026-07-28) has no such channel."""
    try:
        session = context.request_context.session
        caps = session.client_capabilities
        channel = session.can_send_request
    except (AttributeError, ValueError, LookupError):  # no session: an in-process call without a client
        return False
    asked = getattr(caps, "elicitation", None)
    return bool(channel) and asked is not None and (asked.form is not None or asked.url is None)


def question(tool: str, does: str, arguments: dict) -> str:
    shown = {k: v for k, v in arguments.items() if k not in ("yes", "plan_id")}
    said = json.dumps(shown, sort_keys=True)
    said = said if len(said) <= ASKED_CHARS else said[:ASKED_CHARS] + "..."
    return (f"An agent asks to apply plan {arguments['plan_id']} of {tool} ({does.rstrip('.')}): {said}. "
            "Apply it?")


async def approve(context, tool: str, does: str, effect: str, arguments: dict) -> None:
    """Nothing when the call may go on; errors.Refused when the person asked did not approve it."""
    if not applies_a_plan(effect, arguments) or not can_ask(context):
        return
    try:
        said = await context.elicit(question(tool, does, arguments), Approval)
    except Exception as e:  # noqa: BLE001 - an ask that failed is not an approval
        raise errors.Refused(f"{tool}: the client could not ask for approval of plan {arguments['plan_id']} "
                             f"({type(e).__name__}); nothing was done") from None
    if said.action == "accept" and said.data.apply:
        return
    how = "declined" if said.action in ("accept", "decline") else "dismissed"
    raise errors.Refused(f"{tool}: the person asked {how} plan {arguments['plan_id']}; nothing was done")
