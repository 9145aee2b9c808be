"""OpenAI's chat-completions API over Switchboard's runs: `GET /v1/models`
and `POST /v1/chat/completions`, so chat clients, editor plugins and agent
CLIs that speak only that API get routing, memory, instruction pages,
sources and run records unchanged.

One request is one run, posted with the client's last message only:

* its conversation is named by the ``X-Switchboard-Conversation`` header,
  or created (its id comes back in that header); the run's id comes back in
  ``X-Switchboard-Run``;
* the project whose memory the run reads is named by the
  ``X-Switchboard-Project`` header (none: the user's personal project);
* the client's earlier messages must be the latest turns of that
  conversation (``conversation.history_matches``); the model gets the earlier turns
  from the conversation's stored history, never twice. A new conversation
  is first seeded with the earlier messages the client sent;
* system (and developer) messages become the run's client-instructions
  layer, after the user's instruction page;
* ``agent:<id>`` models ask that agent on its shared thread, as
  ``POST /api/agent/agents/{id}/asks`` does;
* ``usage`` holds the run's tokens (its final event: the run record's);
* errors have OpenAI's shape, ``{"error": {"message", "type", "param",
  "code"}}``, with the HTTP API's status codes, and ``x-should-retry:
  false`` (the official SDKs would otherwise repeat a POST that may already
  have posted a message) except on 503 before anything was written.

The stream is a view of the HTTP API's own (``gateway.streams``): the same
relay, resumed on another engine replica the same way.

One module per concern: ``routes`` (the /v1 routes), ``exchange`` (what a
request's body becomes), ``conversation`` (the conversation a run goes to,
and its history check), ``completion`` (a run's events as a completion or
its chunks) and ``errors`` (OpenAI's error shape)."""
