"""Retriever kinds and reranker kinds: each declared once, found through entry points.

A *kind* (``pgvector``, ``fulltext``, ``opensearch``, a cross-encoder …) is a class that
declares, in one place, everything the workbench needs to know about it:

* ``kind``: its name in experiment files (``kind = "pgvector"``);
* ``Params``: its parameters as a pydantic v2 model (type, range or choices, default and
  meaning in each ``Field``'s description), the way ir_measures measures declare theirs.
  Experiment loading, the tuning space, the runner and MLflow tracking all read it:
  a value out of range fails when the experiment loads, naming the file and the key;
* ``open(name, params, ds, res)``: how it opens on a dataset, asking the runner's
  :class:`~workbench.protocols.Resources` only for what it needs (its index, a model);
* ``cache_extra(params, ds, res)``: what besides its parameters shapes its candidates
  (a model id, a lexicon digest); with :meth:`RetrieverKind.code_fingerprint`, the
  sha256 of its own module's source and of the modules it names in ``code``, this keys
  the candidate cache, so a code change never reads candidates made by the old code.

Kinds are registered through the entry point group ``workbench.retrievers`` (reranker
kinds: ``workbench.rerankers``); the built-in ones are entry points of this
distribution (``pyproject.toml``), and a third-party distribution adds a kind with one
module and one entry-point line. A kind name registered twice is refused
(:class:`~workbench.errors.RegistryError`, naming both distributions), as
ir_datasets' registry refuses a duplicate dataset id.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from collections.abc import Mapping
from functools import cache
from importlib import metadata
from types import ModuleType
from typing import Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from workbench.errors import ConfigError, RegistryError

#: Entry point group → what its entry points name.
GROUPS = {"workbench.retrievers": "retriever", "workbench.rerankers": "reranker"}

#: The parameter that names an ``[embedders.NAME]`` table, in any kind that has one.
EMBEDDER_PARAM = "embedder"


class Params(BaseModel):
    """Base of a kind's parameter model: strict types (no silent ``"5" → 5``), unknown keys refused,
    immutable. Declare each parameter with ``Field(default, ge=…, le=…, description=…)`` or a
    ``Literal[...]`` for choices."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Declaration:
    """What retriever and reranker kinds share: the name, the parameter declaration, the fingerprint."""

    kind: ClassVar[str]
    #: One line for listings (``workbench kinds``).
    summary: ClassVar[str] = ""
    #: A :class:`Params` subclass, or an ``Annotated[Union[...], Field(discriminator=...)]`` of them.
    Params: ClassVar[Any] = Params
    #: Modules besides the kind's own whose source shapes its output (module objects, not paths).
    code: ClassVar[tuple[ModuleType, ...]] = ()

    @classmethod
    def adapter(cls) -> TypeAdapter:
        """The pydantic adapter of :attr:`Params` (built once per kind)."""
        got = cls.__dict__.get("_adapter")
        if got is None:
            got = TypeAdapter(cls.Params)
            cls._adapter = got  # type: ignore[attr-defined]
        return got

    @classmethod
    def parse(cls, params: Mapping[str, Any], where: str = "") -> Any:
        """Validate ``params`` (a TOML table without ``kind``) against :attr:`Params`.

        Returns:
            the parameter model instance, defaults filled in.

        Raises:
            ConfigError: the first problem, as ``<where>.<key> <what is wrong>``, e.g.
                ``lanes.vector.ef_search must be <= 1000 (got 5000)``, or an unknown key with
                the allowed ones listed.
        """
        try:
            return cls.adapter().validate_python(dict(params))
        except ValidationError as exc:
            raise ConfigError(describe_error(cls, exc, params, where)) from None

    @classmethod
    def fields(cls, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Parameter name → pydantic ``FieldInfo`` of the model ``params`` select (a discriminated union
        picks one member by its tag; ``None``: the first member)."""
        model = cls._model_for(params or {})
        return dict(model.model_fields)

    @classmethod
    def _model_for(cls, params: Mapping[str, Any]) -> type[BaseModel]:
        if isinstance(cls.Params, type) and issubclass(cls.Params, BaseModel):
            return cls.Params
        members, tag = _union_members(cls.Params)
        for m in members:
            f = m.model_fields.get(tag)
            if f is not None and params.get(tag) in _literal_values(f.annotation):
                return m
        return members[0]

    @classmethod
    def code_fingerprint(cls) -> str:
        """sha256 (16 hex) of the source of the kind's own module and of :attr:`code`.

        Raises:
            RegistryError: a module's source cannot be read (a kind shipped without sources).
        """
        h = hashlib.sha256()
        for mod in (sys.modules[cls.__module__], *cls.code):
            try:
                h.update(_module_source(mod))
            except (OSError, TypeError) as exc:
                raise RegistryError(f"kind {cls.kind!r}: cannot read the source of {mod.__name__} to fingerprint "
                                    f"its candidates ({exc}); install the distribution with its .py files") from None
        return h.hexdigest()[:16]


@cache
def _module_source(mod: ModuleType) -> bytes:
    """``<module name>\\0<its source>`` (read once per process: a module's code does not change under it)."""
    return mod.__name__.encode() + b"\0" + inspect.getsource(mod).encode()


class RetrieverKind(Declaration):
    """Base class of a retriever kind's declaration (see the module docstring).

    Subclasses set ``kind``, ``summary``, ``Params`` (and ``code``) and implement :meth:`open`;
    they override :meth:`cache_extra` when something besides the parameters shapes their
    candidates, and :meth:`check` for rules across parameters and the experiment.
    """

    #: True for a kind whose every query is a request to a remote system (the live lanes): it is asked only the
    #: queries of the experiment's splits, and those splits key its candidate cache.
    remote: bool = False
    #: True for a kind that applies a query's filter itself (SQL WHERE, OpenSearch bool.filter / k-NN filter);
    #: the runner filters every other kind's hits after the fact and says so (:meth:`filters_natively`).
    native_filters: bool = False

    def filters_natively(self, params: Any) -> bool:
        """Whether this lane applies a query's filter itself (default :attr:`native_filters`)."""
        return self.native_filters

    def exact_twin(self, params: Any) -> dict[str, Any] | None:
        """The parameters that turn this approximate lane into its exact twin, the ground truth its recall is
        measured against (:mod:`workbench.eval.ann`): merged over the lane's parameters as written. None: the
        lane is exact already, or the kind has no approximate search (the default)."""
        return None

    def open(self, name: str, params: Any, ds: Any, res: Any):
        """A live :class:`~workbench.protocols.Retriever` named ``name`` on dataset ``ds``.

        Args:
            params: the validated :attr:`Params` instance.
            ds: the built :class:`workbench.data.catalog.Dataset`.
            res: the runner's :class:`~workbench.protocols.Resources`.
        """
        raise NotImplementedError(f"retriever kind {self.kind!r} does not implement open()")

    def embedder_of(self, params: Any) -> str | None:
        """The ``[embedders.NAME]`` whose vectors shape this lane's ranking (its model id is logged and keys
        the cache), or None."""
        return getattr(params, EMBEDDER_PARAM, None)

    def cache_extra(self, params: Any, ds: Any, res: Any) -> dict[str, Any]:
        """What besides the parameters, the dataset's hashes, the depth and the code shapes the candidates.

        The default: for a lane that reads an embedder, its model id and the ``[index]`` table."""
        emb = self.embedder_of(params)
        if emb is None:
            return {}
        return {"model_id": res.model_id(emb), "index": res.index_params()}

    def check(self, params: Any, experiment: Mapping[str, Any]) -> str:
        """A rule across parameters and the experiment's other tables (``experiment``: the raw TOML);
        returns what is wrong or ``""``. The default checks nothing."""
        return ""

    def max_depth(self, params: Any) -> int | None:
        """The deepest ranking this kind returns (None: no limit); a deeper experiment ``depth`` is refused
        at load."""
        return None


class RerankerKind(Declaration):
    """Base class of a reranker kind's declaration: ``kind``, ``Params``, :meth:`open`, :meth:`lanes`."""

    def open(self, name: str, params: Any, ds: Any, res: Any, runs: Mapping[str, Any]):
        """A live :class:`~workbench.protocols.Reranker` on dataset ``ds``; ``runs``: lane name → the cached
        :class:`~workbench.run.Run` of each lane :meth:`lanes` names."""
        raise NotImplementedError(f"reranker kind {self.kind!r} does not implement open()")

    def lanes(self, params: Any) -> tuple[str, ...]:
        """Lanes of the experiment whose candidates the reranker reads (they are run and cached too)."""
        return ()

    def check(self, name: str, params: Any, dataset: str, res: Any) -> None:
        """Check, before any lane runs, what :meth:`open` will need on ``dataset`` and that the file cannot
        (a model folder, a URL, a token's variable), without loading a model; default nothing.

        Raises:
            ConfigError: naming ``[rerankers.NAME]`` and the fix.
        """

    def cache_extra(self, params: Any, ds: Any, res: Any) -> dict[str, Any]:
        """What besides the parameters and the code shapes its scores (a model id); default nothing."""
        return {}


# ---------------------------------------------------------------- the registry

def _load_group(group: str) -> dict[str, Declaration]:
    base = RetrieverKind if GROUPS[group] == "retriever" else RerankerKind
    found: dict[str, Declaration] = {}
    origin: dict[str, str] = {}
    for ep in sorted(metadata.entry_points(group=group), key=lambda e: (e.name, e.value)):
        dist = getattr(ep.dist, "name", None) or "?"
        try:
            cls = ep.load()
        except (Exception, SystemExit) as exc:  # a broken plug-in names itself; even sys.exit() at import stops nothing silently
            raise RegistryError(f"entry point {ep.name} = {ep.value!r} of {dist} ({group}) does not load: "
                                f"{type(exc).__name__}: {exc}; fix or uninstall {dist}") from None
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise RegistryError(f"entry point {ep.name} = {ep.value!r} of {dist} is not a {base.__name__} subclass")
        problem = declaration_problem(cls)
        if problem:
            raise RegistryError(f"entry point {ep.name} = {ep.value!r} of {dist}: {problem}; fix or uninstall {dist}")
        name = getattr(cls, "kind", None)
        if name != ep.name:
            raise RegistryError(f"entry point {ep.name!r} of {dist} names a class whose kind is {name!r}; "
                                "the entry point's name must be the kind")
        if name in found:
            if origin[name] == f"{dist}:{ep.value}":  # the same distribution seen twice on sys.path
                continue
            raise RegistryError(f"{GROUPS[group]} kind {name!r} is registered twice: by {origin[name]} and by "
                                f"{dist}:{ep.value}; uninstall one of them")
        found[name], origin[name] = cls(), f"{dist}:{ep.value}"
    return found


def declaration_problem(cls: type) -> str:
    """What makes ``cls`` unusable as a kind declaration, or ``""``: ``Params`` must be a :class:`Params`
    model (or a discriminated union of them) without a parameter named ``kind``, whose defaults are valid."""
    params = getattr(cls, "Params", None)
    try:
        models = [params] if isinstance(params, type) else _union_members(params)[0]
    except RegistryError:
        models = []
    if not models or not all(isinstance(m, type) and issubclass(m, BaseModel) for m in models):
        return f"Params must be a workbench.registry.Params model (or an Annotated union of them), got {params!r}"
    for m in cast(list[type[BaseModel]], models):  # each checked just above
        if "kind" in m.model_fields:
            return f"Params {m.__name__} declares a parameter named 'kind', which the kind table itself uses"
        for name, f in m.model_fields.items():
            if f.is_required():
                continue
            import typing

            declared: Any = typing.Annotated[(f.annotation, *f.metadata)] if f.metadata else f.annotation
            default = f.get_default(call_default_factory=True)  # a default_factory's value too
            try:
                TypeAdapter(declared).validate_python(default, strict=True)
            except ValidationError as exc:
                return (f"the default of {m.__name__}.{name} ({default!r}) breaks its own declaration: "
                        f"{exc.errors(include_url=False)[0]['msg']}")
    return ""


@cache
def _registry(group: str) -> dict[str, Declaration]:
    found = _load_group(group)
    if group == "workbench.retrievers" and not found:
        raise RegistryError("no retriever kind is registered (entry point group workbench.retrievers is empty): "
                            "the workbench's own metadata is missing; reinstall it with pip install -e .")
    return found


def retriever_kinds() -> dict[str, RetrieverKind]:
    """Kind name → declaration of every registered retriever kind.

    Raises:
        RegistryError: a duplicate kind, a broken entry point, or none registered at all.
    """
    return _registry("workbench.retrievers")  # type: ignore[return-value]


def reranker_kinds() -> dict[str, RerankerKind]:
    """Kind name → declaration of every registered reranker kind (see :func:`retriever_kinds`)."""
    return _registry("workbench.rerankers")  # type: ignore[return-value]


def retriever_kind(name: str) -> RetrieverKind:
    """The declaration of retriever kind ``name``.

    Raises:
        ConfigError: no such kind (the message lists the registered ones).
    """
    kinds = retriever_kinds()
    if name not in kinds:
        raise ConfigError(f"unknown retriever kind {name!r}; registered: {', '.join(sorted(kinds))}")
    return kinds[name]


def reranker_kind(name: str) -> RerankerKind:
    """The declaration of reranker kind ``name`` (see :func:`retriever_kind`)."""
    kinds = reranker_kinds()
    if name not in kinds:
        raise ConfigError(f"unknown reranker kind {name!r}; registered: {', '.join(sorted(kinds)) or 'none'}")
    return kinds[name]


def clear() -> None:
    """Forget the loaded registries (tests that install a plug-in at run time)."""
    _registry.cache_clear()


def describe_kind(kind: Declaration) -> list[dict[str, Any]]:
    """One row per parameter: ``param, type, default, constraint, description`` (and ``mode`` for a
    discriminated union's member) — what ``workbench kinds`` prints."""
    models: list[type[BaseModel]]
    tag: str | None
    models, tag = ([kind.Params], None) if isinstance(kind.Params, type) else _union_members(kind.Params)
    rows = []
    for model in models:
        variant = f"{tag} = {_literal_values(model.model_fields[tag].annotation)[0]!r}" if tag else ""
        for name, f in model.model_fields.items():
            if name == tag:
                continue
            rows.append({"variant": variant, "param": name, "type": _type_name(f.annotation),
                         "default": "(required)" if f.is_required() else repr(f.get_default(call_default_factory=True)),
                         "constraint": _constraint(f), "description": f.description or ""})
    return rows


# ---------------------------------------------------------------- pydantic plumbing

def _union_members(tp: Any) -> tuple[list[type[BaseModel]], str]:
    import typing

    args = typing.get_args(tp)
    inner, meta = (args[0], args[1:]) if typing.get_origin(tp) is typing.Annotated else (tp, ())
    members = [m for m in typing.get_args(inner) if isinstance(m, type) and issubclass(m, BaseModel)]
    tag = next((getattr(m, "discriminator", None) for m in meta if getattr(m, "discriminator", None)), None)
    if not members or not isinstance(tag, str):
        raise RegistryError(f"Params {tp!r} must be a pydantic model or an Annotated union with a discriminator")
    return members, tag


def _literal_values(annotation: Any) -> tuple[Any, ...]:
    import typing

    out: list[Any] = []
    for a in (annotation,) + typing.get_args(annotation):
        if typing.get_origin(a) is typing.Literal:
            out.extend(typing.get_args(a))
    return tuple(out)


def _type_name(annotation: Any) -> str:
    vals = _literal_values(annotation)
    if vals:
        return " | ".join(repr(v) for v in vals)
    import typing

    if typing.get_args(annotation):
        return str(annotation).replace("typing.", "")
    return getattr(annotation, "__name__", str(annotation))


def _constraint(f: Any) -> str:
    bits = []
    for m in f.metadata:
        for attr, sym in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            v = getattr(m, attr, None)
            if v is not None:
                bits.append(f"{sym} {v}")
    return ", ".join(bits)


def _discriminator(kind: type[Declaration] | Declaration) -> str | None:
    """The field that picks the model of a kind whose ``Params`` is a discriminated union (``mode``), or None."""
    import typing

    params = getattr(kind, "Params", None)
    for meta in getattr(params, "__metadata__", ()) if typing.get_origin(params) is typing.Annotated else ():
        if getattr(meta, "discriminator", None):
            return str(meta.discriminator)
    return None


def describe_error(kind: type[Declaration] | Declaration, exc: ValidationError, given: Mapping[str, Any], where: str) -> str:
    """The first error of ``exc`` as one line naming ``<where>.<key>``, the value and the fix. A key that is not a
    parameter is named before anything else (a misspelt key also leaves its field missing), with the allowed
    key it is closest to."""
    errors = exc.errors(include_url=False)
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = [str(p) for p in err["loc"]]
    model = kind._model_for(given)
    tag = _discriminator(kind)
    if len(loc) > 1 and (loc[0] not in model.model_fields or (tag and loc[0] == str(given.get(tag)))):
        loc = loc[1:]  # a discriminated union's tag comes first (also when the tag's value names a field)
    key = ".".join(loc)
    at = f"{where}.{key}" if where and key else (where or key)
    typ = err["type"]
    union = None if isinstance(kind.Params, type) else _union_members(kind.Params)
    inner = _nested_model(model, loc)
    if inner is not model:  # a key of a nested table (a lane's ``table = { … }``)
        parent = f"{where}.{'.'.join(loc[:-1])}" if where else ".".join(loc[:-1])
        keys = [f.alias or n for n, f in inner.model_fields.items()]
        if typ == "extra_forbidden":
            import difflib

            close = difflib.get_close_matches(loc[-1], keys, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            return f"{at} is not a key of {'.'.join(loc[:-1])}{hint}; allowed: {', '.join(keys)}"
        if typ == "missing":
            f = next((f for n, f in inner.model_fields.items() if (f.alias or n) == loc[-1]), None)
            return f"{parent} needs {loc[-1]}" + (f" ({f.description})" if f and f.description else "")
    if typ == "extra_forbidden":
        variant = _variant(kind, model)
        tag = union[1] if union else None
        allowed = [n for n in model.model_fields if n != tag]
        if union and loc:
            utag = union[1]  # = tag
            readers = [str(_literal_values(m.model_fields[utag].annotation)[0]) for m in union[0]
                       if loc[-1] in m.model_fields]
            if readers:
                return (f"{at} is not read by {utag} {given.get(utag)!r} (only by {', '.join(readers)}); remove it "
                        f"(allowed: {', '.join(allowed) or 'none'})")
        import difflib

        close = difflib.get_close_matches(loc[-1], allowed, n=1) if loc else []
        hint = f" (did you mean {close[0]}?)" if close else ""
        return f"{at} is not a parameter of {kind.kind}{variant}{hint}; allowed: {', '.join(allowed) or 'none'}"
    if typ == "missing":
        f = model.model_fields.get(loc[-1]) if loc else None
        need = f"needs {loc[-1] if loc else '?'}" + (f" ({f.description})" if f and f.description else "")
        return f"{where}: {union[1]} {given.get(union[1])!r} {need}" if union else f"{where} {need}"
    if typ in ("union_tag_invalid", "union_tag_not_found"):
        members, tag = union  # type: ignore[misc]
        choices = [v for m in members for v in _literal_values(m.model_fields[tag].annotation)]
        if typ == "union_tag_not_found":
            return f"{where} needs {tag} (one of {', '.join(map(repr, choices))})"
        return f"{where}.{tag} must be one of {', '.join(map(repr, choices))}, got {given.get(tag)!r}"
    value = err.get("input")
    f = model.model_fields.get(loc[0]) if loc else None
    if typ in ("greater_than_equal", "less_than_equal", "greater_than", "less_than", "int_type", "float_type",
               "int_from_float") and f is not None:
        bounds = {attr: getattr(m, attr) for m in f.metadata for attr in ("ge", "le") if getattr(m, attr, None) is not None}
        import typing

        is_int = int in (f.annotation, *typing.get_args(f.annotation))
        what = "an integer" if is_int else "a number"
        if len(bounds) == 2:
            return f"{at} must be {what} in {bounds['ge']}..{bounds['le']} (got {value!r})"
        if bounds.get("ge") == 1 and is_int and len(bounds) == 1:
            return f"{at} must be a positive integer (got {value!r})"
        if "ge" in bounds:
            return f"{at} must be {what} >= {bounds['ge']} (got {value!r})"
    msg = err["msg"]
    if typ == "string_pattern_mismatch":
        msg = f"must match {err.get('ctx', {}).get('pattern', '?')}"
    elif msg.startswith("Input should be "):
        msg = "must be " + msg[len("Input should be "):]
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    return f"{at} {msg}" if typ == "value_error" else f"{at} {msg} (got {value!r})"


def _nested_model(model: type[BaseModel], loc: list[str]) -> type[BaseModel]:
    """The model that holds ``loc[-1]`` when ``loc`` goes through nested models (``table.name``), else ``model``."""
    import typing

    for part in loc[:-1]:
        f = model.model_fields.get(part) or next((f for f in model.model_fields.values() if f.alias == part), None)
        if f is None:
            return model
        sub = next((a for a in (f.annotation, *typing.get_args(f.annotation))
                    if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if sub is None:
            return model
        model = sub
    return model


def _variant(kind: Any, model: type[BaseModel]) -> str:
    if isinstance(kind.Params, type):
        return ""
    _members, tag = _union_members(kind.Params)
    vals = _literal_values(model.model_fields[tag].annotation)
    return f" with {tag} {vals[0]!r}" if vals else ""
