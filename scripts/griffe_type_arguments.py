"""A griffe extension for the API reference: a generic base's methods, with the subclass's
type arguments filled in.

Why: ``Client`` and ``AsyncClient`` get ``lock()``, ``semaphore()`` and
``read_write_lock()`` from one private generic base, ``LockMaker[LockT, ReadWriteT]``.
Rendered as inherited, their return types read ``-> LockT``, a private name the reader
cannot look up. This copies each public method of such a base into the class that
subclasses it, with ``LockT`` replaced by what the class passed (``Lock``,
``AsyncLock``), so the reference shows the types a caller gets. The code is unchanged.

Used by mkdocs.yml (``extensions`` of the mkdocstrings Python handler).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import griffe


class TypeArguments(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **_: Any) -> None:
        for cls in _classes(pkg):
            for base in cls.bases:
                generic = _generic_base(base, loader)
                if generic is not None:
                    _copy_methods(generic, _type_arguments(generic, base), into=cls)


def _classes(module: griffe.Module) -> list[griffe.Class]:
    found: list[griffe.Class] = []
    for member in module.members.values():
        if member.is_alias:
            continue
        if isinstance(member, griffe.Module):
            found.extend(_classes(member))
        elif isinstance(member, griffe.Class):
            found.append(member)
    return found


def _generic_base(base: Any, loader: griffe.GriffeLoader) -> griffe.Class | None:
    """The class that ``Base[Arg, ...]`` subscripts, when it is one of ours."""
    if not isinstance(base, griffe.ExprSubscript) or not isinstance(base.left, griffe.ExprName):
        return None
    try:
        target = loader.modules_collection[base.left.canonical_path]
    except KeyError:
        return None  # typing.Generic and other names outside the package
    return target if isinstance(target, griffe.Class) else None


def _elements(slice_: Any) -> list[Any]:
    return list(slice_.elements) if isinstance(slice_, griffe.ExprTuple) else [slice_]


def _type_arguments(generic: griffe.Class, base: griffe.ExprSubscript) -> dict[str, Any]:
    """{type parameter's name: the argument}, from ``class G(Generic[P, ...])``."""
    for own_base in generic.bases:
        if isinstance(own_base, griffe.ExprSubscript) and str(own_base.left) == "Generic":
            names = [str(param) for param in _elements(own_base.slice)]
            return dict(zip(names, _elements(base.slice), strict=False))
    return {}


def _copy_methods(generic: griffe.Class, arguments: dict[str, Any], *, into: griffe.Class) -> None:
    if not arguments:
        return
    for name, member in generic.members.items():
        if name.startswith("_") or name in into.members or member.is_alias:
            continue
        if not isinstance(member, griffe.Function):
            continue
        method = copy.copy(member)
        method.returns = _substitute(member.returns, arguments)
        method.parameters = griffe.Parameters(
            *(_parameter(param, arguments) for param in member.parameters)
        )
        into.set_member(name, method)


def _parameter(param: griffe.Parameter, arguments: dict[str, Any]) -> griffe.Parameter:
    return griffe.Parameter(
        param.name,
        annotation=_substitute(param.annotation, arguments),
        kind=param.kind,
        default=param.default,
        docstring=param.docstring,
    )


def _substitute(annotation: Any, arguments: dict[str, Any]) -> Any:
    """The annotation with each type parameter's name replaced by its argument."""
    if isinstance(annotation, griffe.ExprName):
        return arguments.get(annotation.name, annotation)
    if isinstance(annotation, griffe.Expr) and dataclasses.is_dataclass(annotation):
        changes = {}
        for field in dataclasses.fields(annotation):
            value = getattr(annotation, field.name)
            if field.name == "parent":
                continue
            if isinstance(value, griffe.Expr):
                changes[field.name] = _substitute(value, arguments)
            elif isinstance(value, (list, tuple)):
                changes[field.name] = type(value)(_substitute(v, arguments) for v in value)
        return dataclasses.replace(annotation, **changes)
    return annotation
