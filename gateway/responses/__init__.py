"""Response bodies: one pydantic model per route's JSON, so /openapi.json
describes every answer.

Most bodies are a proto message's view (gateway.responses.views): the
message as proto JSON prints it, with the fields the HTTP body reshapes
declared once each, typing the field and converting its value. The others
are written by hand (`Body`).

The models are strict and forbid unknown fields: a body that strays from
its model is a 500 and a failing test, never a silent drop. A route
returns a model instance, and its return annotation is its response model
(FastAPI reads it; mypy checks the body against it); the router drops the
fields a body left unset (`exclude_unset`), so an absent field stays absent.

The modules: base (Body, errors, the router, SSE answers), views (the
derivation from protos), then the bodies by concern: threads
(conversations, runs, agents), catalog, memory (notes, pages, proposals),
projects, openai, admin."""

from gateway.responses.admin import *  # noqa: F403
from gateway.responses.base import *  # noqa: F403
from gateway.responses.catalog import *  # noqa: F403
from gateway.responses.memory import *  # noqa: F403
from gateway.responses.openai import *  # noqa: F403
from gateway.responses.projects import *  # noqa: F403
from gateway.responses.threads import *  # noqa: F403
from gateway.responses.views import *  # noqa: F403
