"""Run webhooks: a run may name a URL its record is POSTed to once it ends.

- ``urls``: which URLs and addresses are allowed (the SSRF guard);
- ``signing``: Standard Webhooks headers;
- ``models`` and ``outbox``: the outbox written with the run's end, claimed
  under a lease, and the journal of attempts;
- ``worker``: the background task that delivers due rows, with retries;
- ``service``: what the API offers (URL check, deliveries read back,
  default webhooks: a conversation's per user, a shared agent's per project)."""
