"""The tools a run's model may call, and the rules on which it may call.

- ``context``: a run's side — the sources its conversation allows, its
  :class:`ToolContext` (what the tools read, for the run's sources) and a
  call's :class:`ToolResult`;
- ``delimiting``: every result wrapped as data, never instructions;
- ``policy``: which sources a run reads, who may write (the write guard),
  and the refusals;
- ``registry``: which tools a run is offered, their specs, and the one
  call that runs any of them (:class:`ToolRegistry`);
- one module per built-in tool (``search_workspace``, ``read_page``,
  ``query_connector``, ``save_note``, ``propose_instruction_update``,
  ``ask_agent``, ``live_state``, ``set_live_state``), each a
  ``builtin.Builtin``;
- ``backend``: what the built-ins need from the other services, and
  ``engine_backend``, that over the engine's collaborators; ``connectors``
  and ``mcp_client``: the other sources a run may be allowed."""

from services.engine.tools.context import AllowedSources, SourceRead, ToolContext, ToolResult
from services.engine.tools.registry import ToolRegistry

__all__ = ["AllowedSources", "SourceRead", "ToolContext", "ToolRegistry", "ToolResult"]
