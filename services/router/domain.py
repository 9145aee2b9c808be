"""Rules of the router service: the skill catalog with per-user enablement,
the Skill Router around services/router/skill_router.py (forced skills,
the caller's eligible skills, a current index), "not relevant" feedback, and
the ``Auto`` model router. No gRPC here."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from services.router.model_routing import ModelOption, ModelRoute, route_model
from services.router.models import RouterAuditEvent, Skill, SkillEnablement, SkillFeedback
from services.router.repository import NameTaken, RouterRepository
from services.router.request_parts import split_request
from services.router.skill_router import (
    Arbiter,
    Branch,
    Decision,
    IndexedSkill,
    SkillIndex,
    Thresholds,
    embedding_text,
    route,
)
from services.shared.audit import Actor, new_event, require_admin
from services.shared.embeddings import TextEmbedding, embed, from_bytes, text_sha256, to_bytes
from services.shared.errors import FailedPrecondition, InvalidArgument, NotFound, TooLarge
from services.shared.masks import masked_fields
from services.shared.pagination import as_instant, as_text, by_offset, offset_token, page_of, page_request
from services.shared.rebuild import BATCH, Background, Progress
from switchboard.common.v1.common_pb2 import AuditEvent, AuditPosition

MAX_TEXT_CHARS = 32_000
MAX_FORCED_SKILLS = 16
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 2_000
MAX_BODY_CHARS = 20_000
MAX_ID_CHARS = 128
# An engine provider's name (services/engine/providers/config.py).
MAX_PROVIDER_CHARS = 64
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]*$")
UPDATABLE = frozenset({"name", "description", "body", "auto_use"})
# A catalog rebuild embeds at most this many descriptions on the spot (an
# edit, a new skill); more (the embedder changed) wait for the reindex.
INLINE_EMBED_LIMIT = 32

AutoUseChange = Literal["keep", "inherit", "on", "off"]


@dataclass(frozen=True)
class SkillView:
    """A catalog skill as the caller sees it."""

    skill: Skill
    enabled: bool
    effective_auto_use: bool


@dataclass(frozen=True)
class ChosenSkill:
    skill_id: str
    name: str
    forced: bool
    body: str


@dataclass(frozen=True)
class SkillRoute:
    skills: tuple[ChosenSkill, ...]
    decision: Decision


def _view(skill: Skill, row: SkillEnablement | None) -> SkillView:
    if row is None:
        return SkillView(skill, True, skill.auto_use)
    return SkillView(skill, row.enabled, skill.auto_use if row.auto_use is None else row.auto_use)


def _indexed(skill: Skill) -> IndexedSkill:
    return IndexedSkill(skill.id, skill.name, skill.description, skill.body, skill.builtin, skill.auto_use)


def _forced_name(raw: str) -> str:
    return raw.strip().removeprefix("/").strip().lower()


def _check_text(text: str, field: str, *, required: bool) -> None:
    if len(text) > MAX_TEXT_CHARS:
        raise TooLarge(f"{field} is longer than {MAX_TEXT_CHARS} characters", field=field)
    if required and not text.strip():
        raise InvalidArgument(f"{field} must not be empty", field=field)


def _check_skill_fields(values: dict[str, Any]) -> None:
    if "name" in values:
        name = values["name"]
        if not (0 < len(name) <= MAX_NAME_CHARS and _SLUG.match(name)):
            raise InvalidArgument(
                f"name must be 1 to {MAX_NAME_CHARS} lower-case letters, digits and dashes", field="name"
            )
    if "description" in values and len(values["description"]) > MAX_DESCRIPTION_CHARS:
        raise TooLarge(f"description is longer than {MAX_DESCRIPTION_CHARS} characters", field="description")
    if "body" in values:
        if not values["body"].strip():
            raise InvalidArgument("body must not be empty", field="body")
        if len(values["body"]) > MAX_BODY_CHARS:
            raise TooLarge(f"body is longer than {MAX_BODY_CHARS} characters", field="body")


class RouterDomain:
    def __init__(
        self,
        repository: RouterRepository,
        index: SkillIndex,
        thresholds: Thresholds,
        models: Sequence[ModelOption],
        arbiter: Arbiter | None = None,
        arbitration_enabled: bool = True,
        embed_limit: int = INLINE_EMBED_LIMIT,
        reindex_in_background: bool = True,
    ) -> None:
        self._repo = repository
        self._embed_limit = embed_limit
        # When more skills lack a vector than a rebuild embeds on the spot.
        self._reindex = (
            Background(f"router reindex ({index.embedder.name})") if reindex_in_background else None
        )
        self._index = index
        self._thresholds = thresholds
        self._models = tuple(models)
        self._arbiter = arbiter
        self._arbitration_enabled = arbitration_enabled
        self._rebuilding = asyncio.Lock()

    @property
    def thresholds(self) -> Thresholds:
        return self._thresholds

    @property
    def missing_vectors(self) -> int:
        """Skills the index has no vector for yet (lexical-only routing)."""
        return self._index.missing_vectors

    async def current_index(self, revision: int | None = None) -> SkillIndex:
        """The index at the database's catalog ``revision`` (read here when not
        given): a rebuild, embedding only changed descriptions, when another
        replica, or this one, changed the catalog. Vectors stored by any
        replica are reused; the ones embedded here are stored."""
        if revision is None:
            revision = await self._repo.revision()
        if revision != self._index.revision:
            async with self._rebuilding:
                revision, skills = await self._repo.all_skills()
                if revision != self._index.revision:
                    embedder = self._index.embedder
                    stored = await self._repo.skill_vectors(embedder.name, embedder.dimension)
                    fresh = await self._index.rebuild(
                        [_indexed(s) for s in skills],
                        revision,
                        {i: (digest, from_bytes(v)) for i, (digest, v) in stored.items()},
                        self._embed_limit,
                    )
                    if fresh:
                        rows = {i: (digest, to_bytes(v)) for i, (digest, v) in fresh.items()}
                        await self._repo.store_skill_vectors(rows, embedder.name, embedder.dimension)
        if self._index.missing_vectors and self._reindex is not None:
            self._reindex.start(self.reindex)
        return self._index

    async def close(self) -> None:
        """Stops a background reindex (what it stored stays)."""
        if self._reindex is not None:
            await self._reindex.close()

    async def reindex(self, progress: Progress, batch: int = BATCH) -> int:
        """Stores a vector of the configured embedder for every skill that has
        none (of its current text), a batch per transaction, then rebuilds the
        index with them. Returns how many it embedded."""
        embedder = self._index.embedder
        _, skills = await self._repo.all_skills()
        stored = await self._repo.skill_vectors(embedder.name, embedder.dimension)
        texts = {s.id: embedding_text(s.name, s.description) for s in skills}
        missing = [i for i, text in texts.items() if stored.get(i, ("", b""))[0] != text_sha256(text)]
        done, total = len(texts) - len(missing), len(texts)
        progress(done, total)
        for start in range(0, len(missing), batch):
            ids = missing[start : start + batch]
            rows = await embed(embedder, [texts[i] for i in ids])
            await self._repo.store_skill_vectors(
                {i: (text_sha256(texts[i]), to_bytes(row)) for i, row in zip(ids, rows, strict=True)},
                embedder.name,
                embedder.dimension,
            )
            done += len(ids)
            progress(done, total)
        async with self._rebuilding:
            self._index.revision = None  # the next use loads what was stored
        await self.current_index()
        return len(missing)

    # The catalog

    async def list_skills(self, user: str, requested_size: int, token: str) -> tuple[list[SkillView], str]:
        size, after = page_request(requested_size, token, lambda cursor: as_text(cursor["after"]))
        rows = await self._repo.list_skills(after or "", size + 1)
        enablements = await self._repo.enablements(user)
        page, next_token = page_of(rows, size, lambda skill: {"after": skill.name})
        return [_view(s, enablements.get(s.id)) for s in page], next_token

    async def _skill(self, id_or_name: str) -> Skill:
        skill = await self._repo.find_skill(id_or_name.strip()) if id_or_name.strip() else None
        if skill is None:
            raise NotFound(f"skill {id_or_name!r} not found", skill=id_or_name)
        return skill

    async def get_skill(self, user: str, id_or_name: str) -> SkillView:
        skill = await self._skill(id_or_name)
        return _view(skill, await self._repo.enablement(user, skill.id))

    async def create_skill(
        self, actor: Actor, request_id: str, name: str, description: str, body: str, auto_use: bool
    ) -> SkillView:
        require_admin(actor, "adding a skill to the workspace catalog")
        if len(request_id) > MAX_ID_CHARS:
            raise InvalidArgument(f"request_id is longer than {MAX_ID_CHARS} characters", field="request_id")
        name, description = name.strip(), description.strip()
        _check_skill_fields({"name": name, "description": description, "body": body})
        skill = Skill(
            id=str(uuid.uuid4()),
            name=name,
            description=description,
            body=body,
            builtin=False,
            auto_use=auto_use,
            create_request_id=request_id or None,
        )
        try:
            audit = new_event(RouterAuditEvent, actor, "skill.create", skill.id, f"name={skill.name}")
            saved = await self._repo.insert_skill(skill, audit)
        except NameTaken as exc:
            raise FailedPrecondition(f"a skill named {skill.name!r} exists already", name=skill.name) from exc
        return _view(saved, await self._repo.enablement(actor.user, saved.id))

    async def update_skill(
        self, actor: Actor, skill_id: str, values: dict[str, Any], paths: Sequence[str]
    ) -> SkillView:
        require_admin(actor, "changing a skill of the workspace catalog")
        fields = masked_fields(paths, UPDATABLE)
        changes = {p: values[p].strip() if p in ("name", "description") else values[p] for p in fields}
        _check_skill_fields(changes)
        skill = await self._skill(skill_id)
        if skill.builtin:
            raise FailedPrecondition(
                f"{skill.name} is a built-in skill and cannot be changed", skill=skill.name
            )
        try:
            detail = f"name={skill.name} fields={','.join(sorted(changes))}"
            audit = new_event(RouterAuditEvent, actor, "skill.update", skill.id, detail)
            updated = await self._repo.update_skill(skill.id, changes, audit)
        except NameTaken as exc:
            raise FailedPrecondition(
                f"a skill named {changes['name']!r} exists already", name=changes["name"]
            ) from exc
        if updated is None:
            raise NotFound(f"skill {skill_id!r} not found", skill=skill_id)
        return _view(updated, await self._repo.enablement(actor.user, updated.id))

    async def delete_skill(self, actor: Actor, skill_id: str) -> None:
        require_admin(actor, "deleting a skill of the workspace catalog")
        skill = await self._skill(skill_id)
        if skill.builtin:
            raise FailedPrecondition(
                f"{skill.name} is a built-in skill and cannot be deleted", skill=skill.name
            )
        audit = new_event(RouterAuditEvent, actor, "skill.delete", skill.id, f"name={skill.name}")
        if not await self._repo.delete_skill(skill.id, audit):
            raise NotFound(f"skill {skill_id!r} not found", skill=skill_id)

    async def list_audit(
        self, actor: Actor, requested_size: int, token: str, before: AuditPosition | None
    ) -> tuple[list[AuditEvent], str]:
        """The catalog's audit log, newest first: for admins."""
        return await self._repo.audit.list(actor, requested_size, token, before)

    async def set_enablement(
        self, user: str, skill_id: str, enabled: bool, auto_use: AutoUseChange
    ) -> SkillView:
        skill = await self._skill(skill_id)
        current = await self._repo.enablement(user, skill.id)
        override = {"inherit": None, "on": True, "off": False}.get(
            auto_use, current.auto_use if current else None
        )
        await self._repo.set_enablement(user, skill.id, enabled, override)
        return _view(skill, await self._repo.enablement(user, skill.id))

    # The Skill Router

    async def route_skills(
        self,
        user: str,
        text: str,
        forced_skills: Sequence[str],
        offline: bool,
        embedded: TextEmbedding | None = None,
    ) -> SkillRoute:
        """``embedded``: the request's vector if the caller has one; used only
        when it is exactly what the router would embed (SkillIndex.embed_query)."""
        names = list(dict.fromkeys(n for n in map(_forced_name, forced_skills) if n))
        _check_text(text, "text", required=not names)
        if len(names) > MAX_FORCED_SKILLS:
            raise InvalidArgument(f"at most {MAX_FORCED_SKILLS} forced skills", field="forced_skills")
        if names:
            return await self._forced(names)
        # Skills are matched on what the request asks, not on the text it
        # carries (request_parts.py). The database read and the embedding
        # (a worker thread for a real model) overlap.
        parts = split_request(text)
        (revision, enablements), query = await asyncio.gather(
            self._repo.routing_state(user), self._index.embed_query(parts.instruction, embedded)
        )
        index = await self.current_index(revision)

        def eligible(skill: IndexedSkill) -> bool:
            if skill.builtin or not skill.description.strip():
                return False
            row = enablements.get(skill.id)
            if row is None:
                return skill.auto_use
            return row.enabled and (skill.auto_use if row.auto_use is None else row.auto_use)

        candidates = index.candidates(parts.instruction, query, eligible)
        allowed = not offline and self._arbitration_enabled
        chosen, decision = await route(
            text,
            candidates,
            {c.skill_id: index.skills[c.skill_id].description for c in candidates},
            self._thresholds,
            self._arbiter,
            allowed,
            parts.builtin_task,
        )
        if parts.split:
            decision = replace(
                decision,
                matched_text=parts.instruction,
                explanation=f"matched on the instruction, not on the {len(parts.material)} characters "
                f"of text it carries; {decision.explanation}",
            )
        excluded = index.default_excluded + sum(
            int(index.default_eligible(skill)) - int(eligible(skill))
            for skill_id in enablements
            if (skill := index.skills.get(skill_id)) is not None
        )
        decision = replace(decision, embedder=index.embedder.name, excluded_count=excluded)
        if index.missing_vectors:
            decision = replace(
                decision,
                embedder="",
                explanation=(
                    f"lexical only: the skill index is being rebuilt for {index.embedder.name} "
                    f"({index.missing_vectors} of {len(index)} skills without a vector yet); "
                    + decision.explanation
                ),
            )
        return SkillRoute(
            tuple(
                ChosenSkill(c.skill_id, c.name, forced=False, body=index.skills[c.skill_id].body)
                for c in chosen
            ),
            decision,
        )

    async def _forced(self, names: Sequence[str]) -> SkillRoute:
        """The user forced these: the router does not run, and drops none
        (not even one the user disabled: forcing is asking)."""
        found = await self._repo.skills_named(names)
        for name in names:
            if name not in found:
                raise NotFound(f"skill {name!r} not found", skill=name)
        t = self._thresholds
        return SkillRoute(
            tuple(ChosenSkill(found[n].id, n, forced=True, body=found[n].body) for n in names),
            Decision(
                Branch.FORCED,
                t.high,
                t.low,
                max_auto_skills=t.max_auto_skills,
                explanation=f"forced by the user: {', '.join(names)}; the router did not run",
            ),
        )

    # Feedback

    async def create_feedback(
        self, user: str, request_id: str, skill_id: str, request_text: str, run_id: str
    ) -> tuple[SkillFeedback, bool]:
        """Records "this skill was not relevant"; True when the skill is still
        used automatically for the caller (the page offers to turn it off)."""
        if len(request_id) > MAX_ID_CHARS or len(run_id) > 64:
            raise InvalidArgument("request_id or run_id is too long", field="request_id")
        _check_text(request_text, "request_text", required=True)
        skill = await self._skill(skill_id)
        saved = await self._repo.insert_feedback(
            SkillFeedback(
                id=str(uuid.uuid4()),
                user_id=user,
                request_id=request_id or str(uuid.uuid4()),
                skill_id=skill.id,
                skill_name=skill.name,
                request_text=request_text,
                run_id=run_id,
            )
        )
        view = _view(skill, await self._repo.enablement(user, skill.id))
        return saved, view.enabled and view.effective_auto_use and not skill.builtin

    async def list_feedback(
        self, user: str, requested_size: int, token: str
    ) -> tuple[Sequence[SkillFeedback], str]:
        size, before = page_request(
            requested_size, token, lambda cursor: (as_instant(cursor["t"]), as_text(cursor["id"]))
        )
        rows = await self._repo.list_feedback(user, before, size + 1)
        return page_of(rows, size, lambda last: {"t": last.create_time.isoformat(), "id": last.id})

    # The model router

    def list_models(self, requested_size: int, token: str) -> tuple[tuple[ModelOption, ...], str]:
        """The configured models in configuration order, one page."""
        size, start = page_request(requested_size, token, by_offset)
        start = start or 0
        return self._models[start : start + size], offset_token(start + size, len(self._models))

    def route_model(
        self, text: str, requested_model: str, default_model: str, offline: bool, provider: str = ""
    ) -> ModelRoute:
        """``provider``: only that provider's models (an agent pinned to it)."""
        _check_text(text, "text", required=False)
        if len(provider) > MAX_PROVIDER_CHARS:
            raise TooLarge(f"provider_id is longer than {MAX_PROVIDER_CHARS} characters", field="provider_id")
        return route_model(
            self._models, text, requested_model, default_model, offline=offline, provider=provider.strip()
        )

    # Both routers for one chat message

    async def route_message(
        self,
        user: str,
        text: str,
        forced_skills: Sequence[str],
        requested_model: str,
        default_model: str,
        offline: bool,
        embedded: TextEmbedding | None = None,
    ) -> tuple[SkillRoute, ModelRoute]:
        """The skills and the model for one message, as route_skills and
        route_model decide them. The model first: it reads no database, so a
        request it refuses costs no routing."""
        model = self.route_model(text, requested_model, default_model, offline)
        return await self.route_skills(user, text, forced_skills, offline, embedded), model
