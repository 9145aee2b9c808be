"""``switchboard agents list|register|update|members|add-member|remove-member``,
``skills list`` and
``models list``: the project's registry and catalogs."""

from __future__ import annotations

import argparse
from typing import Any

from client import exits
from client.api import segment
from client.commands import Context, UsageError, all_pages, listing
from client.messages import say
from client.output import short

# The agent fields `register` and `update` take, as options and as the API names them.
AGENT_FIELDS = {
    "name": "display_name",
    "persona": "persona",
    "provider": "provider_id",
    "model": "model",
    "injection": "injection_strategy",
}


def add(commands: Any, common: argparse.ArgumentParser) -> None:
    agents = commands.add_parser("agents", help="the project's agents").add_subparsers(
        dest="action", required=True, metavar="action"
    )
    agents.add_parser("list", parents=[common], help="every registered agent").set_defaults(
        handler=list_agents
    )
    for action, verb in (("register", "register an agent (an existing id is left as it is)"),
                         ("update", "change the fields given (at least one)")):  # fmt: skip
        command = agents.add_parser(action, parents=[common], help=verb, description=verb)
        command.add_argument("agent", metavar="AGENT", help="its id: lower-case letters, digits, dashes")
        command.add_argument("--name", help="what to show (default: the id)")
        command.add_argument("--persona", help="the agent's own instructions")
        command.add_argument(
            "--provider", help='pin it to this provider: it runs on its models only ("" unpins)'
        )
        command.add_argument("--model", help="a configured model id, or auto")
        command.add_argument(
            "--injection",
            metavar="STRATEGY",
            help="how a command-line provider receives its context: unspecified (the provider's own), "
            "convention_file, flag, stdin or env",
        )
        command.set_defaults(handler=register_agent if action == "register" else update_agent)
    members = agents.add_parser("members", parents=[common], help="who may ask an agent and read its thread")
    members.add_argument("agent", metavar="AGENT")
    members.set_defaults(handler=list_members)
    for action, verb in (("add-member", "let a user ask the agent and read its thread (owner or admin)"),
                         ("remove-member", "take that back (owner or admin)")):  # fmt: skip
        command = agents.add_parser(action, parents=[common], help=verb, description=verb)
        command.add_argument("agent", metavar="AGENT")
        command.add_argument("user", metavar="USER")
        command.set_defaults(handler=add_member if action == "add-member" else remove_member)

    skills = commands.add_parser("skills", help="the skill catalog").add_subparsers(
        dest="action", required=True, metavar="action"
    )
    skills.add_parser("list", parents=[common], help="the skills, with your enablement").set_defaults(
        handler=list_skills
    )
    models = commands.add_parser("models", help="the models a run can use").add_subparsers(
        dest="action", required=True, metavar="action"
    )
    models.add_parser("list", parents=[common], help="Auto, then the configured models").set_defaults(
        handler=list_models
    )


def agent_fields(args: argparse.Namespace) -> dict[str, str]:
    return {
        field: getattr(args, option)
        for option, field in AGENT_FIELDS.items()
        if getattr(args, option) is not None
    }


def show_agent(ctx: Context, agent: dict[str, Any], verb: str) -> int:
    """``verb``: the message key, "registered" or "updated"."""
    if ctx.out.json:
        ctx.out.document(agent)
    else:
        model = "/".join(part for part in (agent.get("provider_id"), agent.get("model")) if part) or say(
            "default model"
        )
        name = agent.get("display_name") or agent.get("id")
        ctx.out.line(say(verb, id=agent.get("id"), name=name, model=model))
    return exits.OK


async def list_agents(ctx: Context) -> int:
    agents = (await all_pages(ctx, "/agents", "agents"))["agents"]
    return listing(ctx, agents, ["id", "name", "provider", "model", "injection", "persona"], agent_row)


def agent_row(agent: dict[str, Any]) -> list[str]:
    names = ("id", "display_name", "provider_id", "model", "injection_strategy")
    fields = [str(agent.get(field, "")) for field in names]
    return [*fields, short(agent.get("persona", ""), 50)]


async def register_agent(ctx: Context) -> int:
    agent = await ctx.api.call("POST", "/agents", body={"id": ctx.args.agent, **agent_fields(ctx.args)})
    return show_agent(ctx, agent, "registered")


async def update_agent(ctx: Context) -> int:
    fields = agent_fields(ctx.args)
    if not fields:
        raise UsageError(say("nothing to change"))
    agent = await ctx.api.call("PATCH", f"/agents/{segment(ctx.args.agent)}", body=fields)
    return show_agent(ctx, agent, "updated")


def show_members(ctx: Context, members: dict[str, Any]) -> int:
    if ctx.out.json:
        ctx.out.document(members)
    else:
        ctx.out.line(say("members", agent=members["agent_id"], owner=members["owner"]))
        for member in members["members"]:
            ctx.out.line(f"  {member}")
    return exits.OK


async def list_members(ctx: Context) -> int:
    return show_members(ctx, await ctx.api.call("GET", f"/agents/{segment(ctx.args.agent)}/members"))


async def add_member(ctx: Context) -> int:
    path = f"/agents/{segment(ctx.args.agent)}/members/{segment(ctx.args.user)}"
    return show_members(ctx, await ctx.api.call("PUT", path))


async def remove_member(ctx: Context) -> int:
    path = f"/agents/{segment(ctx.args.agent)}/members/{segment(ctx.args.user)}"
    return show_members(ctx, await ctx.api.call("DELETE", path))


async def list_skills(ctx: Context) -> int:
    skills = (await all_pages(ctx, "/skills", "skills"))["skills"]
    return listing(ctx, skills, ["name", "enabled", "use", "description"], skill_row)


def skill_row(skill: dict[str, Any]) -> list[str]:
    return [
        str(skill.get("name", "")),
        "on" if skill.get("enabled") else "off",
        "auto" if skill.get("effective_auto_use") else "manual",
        short(skill.get("description", ""), 70),
    ]


async def list_models(ctx: Context) -> int:
    models = (await ctx.api.call("GET", "/models")).get("models", [])
    return listing(ctx, models, ["id", "provider", "model", "profile", "flags"], model_row)


def model_row(model: dict[str, Any]) -> list[str]:
    fields = [str(model.get(field, "")) for field in ("id", "provider", "model", "profile")]
    return [*fields, ", ".join(flag for flag in ("web_only", "expensive") if model.get(flag))]
