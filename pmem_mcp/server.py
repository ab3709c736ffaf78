"""The MCP tools, resources and prompt of P-Mem (CONTRACT "Agents: MCP server and Python
client"), on the official ``mcp`` SDK's :class:`MCPServer`.

Every tool goes through the HTTP API with :class:`pmem_client.AsyncClient` — the same
authentication, validation and write order as any other client; nothing here touches the
database. ``client_for()`` gives the client of the agent that is calling: the bearer token's
over streamable HTTP (:mod:`pmem_mcp.http`), the one the stdio command was started with
(:mod:`pmem_mcp.management.commands.pmem_mcp`).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

import pmem_client
from memory.domain.readmodes import AGENT_MODE, READ_MODE_NAMES
from pmem_client import AsyncClient, to_json

T = TypeVar("T")
#: The read modes the recall tool offers: the registry's (memory.reads.READ_MODES), whose names
#: live in memory.domain, which needs no Django (this server runs without it).
ReadMode = Literal[READ_MODE_NAMES]  # type: ignore[valid-type]
ClientFor = Callable[[], AsyncClient]
ToolFn = TypeVar("ToolFn", bound=Callable[..., Awaitable[Any]])

#: History entries a cell carries in a tool answer (the rest through ``fact_history``).
HISTORY_SHOWN = 10
#: What a recall's structured items keep of each item (its line is in the context).
COMPACT_ITEM = ("key", "value", "status", "version", "ordinal", "score", "id", "seq")
def _compact(item: dict[str, Any]) -> dict[str, Any]:
    """What a read's item is, without its line: a session's item names its messages by
    their numbers and scores."""
    out = {k: item[k] for k in COMPACT_ITEM if k in item}
    if item.get("messages"):
        out["messages"] = [{"index": m["index"], "score": m["score"]} for m in item["messages"]]
    return out


#: Cells the frontier resource lists before it says how many more there are.
FRONTIER_SHOWN = 500

INSTRUCTIONS = """\
P-Mem is a memory that keeps every value a fact ever had and knows which one holds now.
Facts are keyed (`mug_1_location`, `alice_employer`); each key is a cell whose status is
`active` (one current value), `contested` (two or more values held open until someone resolves
them) or `empty` (everything was retracted). Write what you learn with `remember` as it
changes; read with `recall` or `get_fact` before you answer from memory; when something you
wrote turns out wrong, `retract` it: the value before it comes back. Nothing is ever lost: the
history of a key shows every value and when it held."""

PROMPT = """\
You have a long-term memory (P-Mem) through the tools `remember`, `recall`, `get_fact`,
`fact_history`, `retract`, `contest`, `resolve` and `observation_status`.

How to use it:
1. Write facts as they change. When you learn or do something that changes the state of the
   world, call `remember` with structured facts: one key per thing that can change, named
   `<entity>_<attribute>` in snake_case (`mug_1_location`, `alice_employer`), and its new
   value. Send the new value only; the memory keeps the old one in the history.
2. Read before you answer. Before answering from memory, call `recall` with the question
   (it returns the current value of the relevant facts) or `get_fact` with the key. A fact
   whose status is `contested` has two or more candidate values: say so, or settle it with
   `resolve` when you know which is right.
3. Correct, don't overwrite, what turned out wrong. If a value you wrote was a mistake (a
   misread, a report made in error), call `retract` with the key and a reason: the value
   before it is reinstated. If a new report conflicts with the current value and you cannot
   tell which is right, `contest` it instead of overwriting.
4. Look back when it matters. `fact_history` lists every value a key had, newest first, with
   when each held; `recall` and `get_fact` take `as_of` to see the memory as it was then.
A tool that refuses an operation answers an error whose text is the reason (for example,
retracting a key that has nothing left to retract)."""


MetadataValue = str | int | float | bool


class Fact(BaseModel):
    key: Annotated[str, Field(description="The fact's key, `<entity>_<attribute>` in "
                                          "snake_case, e.g. `mug_1_location`.")]
    value: Annotated[str | None, Field(description="Its new value. Leave out only with an "
                                                   "op that needs none (revoke).")] = None
    op: Annotated[Literal["accept", "contest", "reject", "revoke", "resolve", "noop"] | None,
                  Field(description="Leave out: the memory decides (a new value supersedes "
                                    "the old). Give one to force it.")] = None
    reason: Annotated[str | None, Field(description="With an op: why (kept in the log).")] = None
    hard_commit: Annotated[bool | None, Field(description=(
        "True: a correction that must be kept even if it repeats the current value."))] = None
    annotate: Annotated[bool | None, Field(description=(
        "True: the memory's model decides whether this value supersedes, contests or only "
        "supports the current one. Left out: a different value supersedes it."))] = None
    metadata: Annotated[dict[str, MetadataValue] | None, Field(description=(
        "Flat labels kept with the value this fact creates, e.g. {\"topic\": \"food\"}; "
        "recall's `filter` selects by them."))] = None
    ttl: Annotated[int | None, Field(ge=1, le=10 * 366 * 24 * 3600, description=(
        "Seconds this value holds (a door code for an hour: 3600): after that it is never "
        "recalled as current, and its history says expired."))] = None
    expires_at: Annotated[str | None, Field(description=(
        "Instead of ttl: when the value stops holding (ISO-8601 with a zone)."))] = None


class Message(BaseModel):
    role: Annotated[str, Field(description="user, assistant, system, tool …")]
    content: Annotated[str, Field(description="What was said.")]
    name: Annotated[str | None, Field(description="The speaker's name, shown instead of the "
                                                  "role.")] = None
    at: Annotated[str | None, Field(description="When it was said (ISO-8601 with a "
                                                "zone).")] = None


class Refused(Exception):
    """A tool's call was refused; the message is what the model reads."""


async def _call(action: Awaitable[T]) -> T:
    """Run a client call; an API refusal becomes :class:`Refused` with its reason."""
    try:
        return await action
    except pmem_client.Conflict as refused:
        raise Refused(refused.reason) from None
    except pmem_client.ApiError as failed:
        raise Refused(failed.error) from None
    except pmem_client.PmemError as failed:
        raise Refused(str(failed)) from None


def _tool(server: MCPServer, **options: Any) -> Callable[[ToolFn], ToolFn]:
    """``server.tool(...)``, where :class:`Refused` answers a tool error whose text is the
    reason alone (the SDK would prefix a ``ToolError`` with "Error executing tool …")."""

    def register(fn: ToolFn) -> ToolFn:
        @functools.wraps(fn)
        async def tool(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except Refused as refused:
                return CallToolResult(content=[TextContent(type="text", text=str(refused))],
                                      is_error=True)

        server.tool(**options)(tool)
        return fn

    return register


def observation_out(observation: pmem_client.Observation) -> dict[str, Any]:
    out: dict[str, Any] = {"id": observation.id, "seq": observation.seq,
                           "status": observation.status}
    if observation.error:
        out["error"] = observation.error
    if observation.replayed:
        out["replayed"] = True
    if observation.settled:
        out["operations"] = [
            {"op": o.op, "requested": o.requested, "key": o.key, "value": o.value,
             "version": o.version, "ordinal": o.ordinal, "status": o.status,
             "reason": o.reason}
            for o in observation.operations]
        # Said outright: text that yielded no fact stored nothing (an agent reading an empty
        # list of operations would believe otherwise).
        if observation.facts_found is not None:
            out["facts_found"] = observation.facts_found
        if observation.note:
            out["note"] = observation.note
    return out


def cell_out(cell: pmem_client.Cell | None) -> dict[str, Any] | None:
    if cell is None:
        return None
    return {"key": cell.key, "value": cell.value, "status": cell.status,
            "version": cell.version, "ordinal": cell.ordinal, "metadata": cell.metadata,
            "support": cell.support,
            "alternatives": to_json(cell.alternatives),
            "history": to_json(cell.history[:HISTORY_SHOWN]),
            "history_total": cell.history_total if cell.history_total is not None
            else len(cell.history),
            "aliases": cell.aliases}


def operation_out(result: pmem_client.OperationResult) -> dict[str, Any]:
    o = result.operation
    return {"operation": {"op": o.op, "key": o.key, "value": o.value, "version": o.version,
                          "ordinal": o.ordinal, "status": o.status, "reason": o.reason,
                          "actor": o.actor,
                          "observation": result.observation.id if result.observation else None},
            "cell": cell_out(result.cell)}


def build_server(client_for: ClientFor, **options: Any) -> MCPServer:
    """The MCP server: tools, resources and prompt, each calling ``client_for()``'s API.
    ``options`` go to :class:`MCPServer` (authentication, for streamable HTTP)."""
    server: MCPServer = MCPServer("pmem", title="P-Mem memory", instructions=INSTRUCTIONS,
                                  version="0.1.0", **options)
    _add_write_tools(server, client_for)
    _add_read_tools(server, client_for)
    _add_resources(server, client_for)

    @server.prompt(name="use_memory", title="How to use this memory",
                   description="Tells a model how to write, read and correct this memory.")
    def use_memory() -> str:
        return PROMPT

    return server


def _add_write_tools(server: MCPServer, client_for: ClientFor) -> None:
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False,
                             idempotent_hint=False, open_world_hint=False)

    @_tool(server, annotations=writes, description=(
        "Write to memory what you observed or learned. Prefer `facts`: [{key, value}], one "
        "key per thing that can change, named `<entity>_<attribute>` (`alice_city`); free "
        "`text` is also read for facts, but may yield none. A new value for a key supersedes "
        "the old one, which stays in its history. With `wait` (default) it answers once "
        "committed: `operations` lists what each fact did (`op`: accept, contest, noop …; "
        "`status`: the fact's status afterwards), `facts_found` how many facts were read, and "
        "`note` says so when nothing was stored — then write it again as `facts`. Writes keep "
        "the order they arrived in. A conversation goes in as `messages`, one observation per "
        "session."))
    async def remember(
        text: Annotated[str | None, Field(description="What happened, in words.")] = None,
        messages: Annotated[list[Message] | None, Field(description=(
            "A chat session ([{role, content, name?, at?}], at most 500): one observation, "
            "read as its transcript and extracted in one call; observed_at defaults to the "
            "last `at`."))] = None,
        facts: Annotated[list[Fact] | None, Field(description="Keyed facts.")] = None,
        source: Annotated[str | None, Field(description=(
            "Where it came from (a sensor, a document, a user). A source with a trust level "
            "must be one this token is bound to; left out, the token's own source when it is "
            "bound to one."))] = None,
        observed_at: Annotated[str | None, Field(description=(
            "When it was true in the world (ISO-8601 with a zone), if not now: a report older "
            "than the current value goes into the history instead of replacing it."))] = None,
        wait: Annotated[bool, Field(description="Wait until committed.")] = True,
    ) -> dict[str, Any]:
        sent = [f.model_dump(exclude_none=True) for f in facts] if facts is not None else None
        said = ([m.model_dump(exclude_none=True) for m in messages]
                if messages is not None else None)
        if not (text or "").strip() and not sent and not said:
            raise Refused("give text, messages and/or facts")
        return observation_out(await _call(client_for().remember(
            text, facts=sent, source=source, observed_at=observed_at, wait=wait,
            messages=said)))

    @_tool(server, annotations=writes, description=(
        "Retract a value that turned out wrong (a misread, a report made in error): the "
        "key's current value is withdrawn and the value before it is reinstated — it is not "
        "deleted, the history keeps it. Give `version` to retract an older version instead "
        "of the current one. Returns the operation and the fact after it. An error means it "
        "was refused, e.g. nothing left to retract."))
    async def retract(
        key: Annotated[str, Field(description="The fact's key.")],
        reason: Annotated[str, Field(description="Why it is wrong (kept in the log).")],
        version: Annotated[int | str | None, Field(description=(
            "A non-current version to retract: its id, or the fact's own ordinal as \"v2\" "
            "(the `ordinal` answers show)."))] = None,
    ) -> dict[str, Any]:
        return operation_out(await _call(client_for().retract(key, reason, version=version)))

    @_tool(server, annotations=writes, description=(
        "Dispute a fact's current value with another candidate when you cannot tell which "
        "is right: the fact becomes `contested` and both values are held open (reads show "
        "both) until `resolve` picks one. Use it instead of overwriting a value you doubt."))
    async def contest(
        key: Annotated[str, Field(description="The fact's key.")],
        value: Annotated[str, Field(description="The competing value.")],
        reason: Annotated[str | None, Field(description="Why it is disputed.")] = None,
    ) -> dict[str, Any]:
        return operation_out(await _call(client_for().contest(key, value, reason=reason)))

    @_tool(server, annotations=writes, description=(
        "Settle a `contested` fact: the winning `value` (or `version`) becomes the current "
        "value, the others are kept in the history as rejected. Refused when the fact is "
        "not contested."))
    async def resolve(
        key: Annotated[str, Field(description="The fact's key.")],
        reason: Annotated[str, Field(description="Why this value wins (kept in the log).")],
        value: Annotated[str | None, Field(description="The winning value.")] = None,
        version: Annotated[int | str | None, Field(description=(
            "The winning version instead of its value: its id, or the fact's own ordinal as "
            "\"v2\"."))] = None,
    ) -> dict[str, Any]:
        if value is None and version is None:
            raise Refused("resolve needs the winner's value or version")
        return operation_out(await _call(client_for().resolve(
            key, value=value, version=version, reason=reason)))


def _add_read_tools(server: MCPServer, client_for: ClientFor) -> None:
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @_tool(server, annotations=reads, description=(
        "Read memory for a question before you answer from it. Answers plain text: in the "
        "default `frontier` mode one `key = value` line per relevant fact, its current value "
        "— a contested fact is marked `(contested)` and lists its candidates after "
        "`alternatives:` (say which are open, or `resolve` it). `evidence` gives the original "
        "observations that best match the question by meaning and by its exact words (what "
        "was said; of a chat session, the messages that matched, numbered as in it); `raw` / `raw_ordered` the most similar ones by meaning alone. `as_of` (ISO-8601 with a zone) "
        "reads the memory as it was then; `filter` keeps facts whose metadata holds each "
        "entry; `min_score` drops lines scored below it (frontier: the query's similarity to "
        "the fact plus up to 0.5 for its exact rare words, -1 to 1.5; evidence: the similarity "
        "plus up to 1 for the question's words, -1 to 2). The "
        "lines are the nearest facts, not necessarily relevant ones: judge them."))
    async def recall(
        query: Annotated[str, Field(description="The question or topic.")],
        mode: Annotated[ReadMode, Field(description="What to read.")] = AGENT_MODE,
        k: Annotated[int | None, Field(description="How many lines at most.", ge=1)] = None,
        as_of: Annotated[str | None, Field(description="Read as of this time.")] = None,
        disclose: Annotated[list[Literal["alternatives", "support", "history"]] | None,
                            Field(description=(
                                "What each fact line adds (frontier; default alternatives): "
                                "`support` its evidence, `history` its earlier values."))
                            ] = None,
        filter: Annotated[dict[str, MetadataValue] | None, Field(description=(
            "frontier: only facts whose metadata has each of these entries."))] = None,
        min_score: Annotated[float | None, Field(description=(
            "Drop lines scored below this (each item's score: see the description)."),
            ge=-1, le=2)] = None,
    ) -> CallToolResult:
        read = await _call(client_for().recall(
            query, mode=mode, k=k, as_of=as_of, filter=filter, min_score=min_score,
            disclose=disclose if disclose is not None else ["alternatives"]))
        context = read.context + (f"\n({read.note})" if read.note else "")
        # The model reads the text; a program may read the items, which name what each line
        # is (never the line again).
        items = [_compact(item) for item in read.items]
        return CallToolResult(content=[TextContent(type="text", text=context)],
                              structured_content={"mode": read.mode, "context": context,
                                                  "items": items})

    @_tool(server, annotations=reads, description=(
        "Look up one fact by key: its current `value`, `status` (`active`; `contested`: "
        "`alternatives` are held open beside `value`; `empty`: everything was retracted), "
        "and its newest history. `as_of` gives the fact as it was at that time."))
    async def get_fact(
        key: Annotated[str, Field(description="The fact's key.")],
        as_of: Annotated[str | None, Field(description="As of this time (ISO-8601).")] = None,
    ) -> dict[str, Any]:
        return cell_out(await _call(client_for().get_fact(key, as_of=as_of))) or {}

    @_tool(server, annotations=reads, description=(
        "Every value a fact has had, newest first, each with its status (active, "
        "superseded, revoked, contested …), `ordinal` (v1 is its first value) and when it "
        "held (`valid_from` … `valid_to`). Pass the returned `next` as `before` for the "
        "following page; `search` finds the values holding some words; `as_of` gives the "
        "history as it stood then."))
    async def fact_history(
        key: Annotated[str, Field(description="The fact's key.")],
        limit: Annotated[int, Field(description="Entries per page.", ge=1, le=1000)] = 50,
        before: Annotated[str | None, Field(description="`next` of the previous page.")] = None,
        as_of: Annotated[str | None, Field(description="As of this time (ISO-8601).")] = None,
        search: Annotated[str | None, Field(description="Words the value holds.")] = None,
    ) -> dict[str, Any]:
        page = await _call(client_for().fact_history(key, limit=limit, before=before,
                                                      as_of=as_of, search=search))
        return {"results": to_json(page.results), "next": page.next, "total": page.total}

    @_tool(server, annotations=reads, description=(
        "The status of an observation `remember` recorded (pending, processing, committed, "
        "failed) and, once committed, the operations it produced. Use it after "
        "`remember(wait=false)`."))
    async def observation_status(
        id: Annotated[int, Field(description="The observation's id.")],
    ) -> dict[str, Any]:
        return observation_out(await _call(client_for().observation(id)))


def _add_resources(server: MCPServer, client_for: ClientFor) -> None:
    @server.resource("pmem://frontier", name="frontier", mime_type="text/plain",
                     description="Every fact's current value and status, one per line.")
    async def frontier() -> str:
        lines: list[str] = []
        more = 0
        try:
            async for cell in client_for().cells():
                if len(lines) < FRONTIER_SHOWN:
                    lines.append(_frontier_line(cell))
                else:
                    more += 1
        except pmem_client.PmemError as failed:
            raise ResourceError(str(failed)) from None
        if more:
            lines.append(f"… and {more} more facts: use the recall tool to find them.")
        return "\n".join(lines) if lines else "(the memory is empty)"

    @server.resource("pmem://cells/{key}", name="cell", mime_type="application/json",
                     description="One fact: value, status, alternatives and newest history.")
    async def cell(key: str) -> dict[str, Any]:
        try:
            return cell_out(await client_for().get_fact(key)) or {}
        except pmem_client.NotFound as missing:
            raise ResourceNotFoundError(missing.error) from None
        except pmem_client.PmemError as failed:
            raise ResourceError(str(failed)) from None


def _frontier_line(cell: pmem_client.Cell) -> str:
    if cell.status == "contested":
        others = " | ".join(a.value for a in cell.alternatives)
        return f"{cell.key} = {cell.value} (contested with: {others})"
    if cell.status == "empty":
        return f"{cell.key}: (empty: every value was retracted)"
    return f"{cell.key} = {cell.value}"
