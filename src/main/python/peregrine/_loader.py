"""Finding the application object and telling ASGI from WSGI."""
import importlib
import inspect
import sys


class LoadError(Exception):
    """The target cannot be served; the message is one line meant for the user."""


class ProtocolMismatch(LoadError):
    """--protocol names a protocol the application's signature cannot serve: a usage error."""


def load(target, factory, protocol):
    """Imports MODULE:ATTRIBUTE and returns (application, "asgi" | "wsgi").

    Import errors propagate unchanged so that the user sees the application's own traceback.
    """
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise LoadError(f'the target "{target}" must be in the form MODULE:ATTRIBUTE')
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name and not module_name.startswith(f"{exc.name}."):
            raise
        raise LoadError(f'could not import module "{module_name}" (sys.path[0] is {sys.path[0]!r})') from None
    app = module
    for name in attribute.split("."):
        try:
            app = getattr(app, name)
        except AttributeError:
            raise LoadError(f'attribute "{attribute}" not found in module "{module_name}"') from None
    if factory:
        if not callable(app):
            raise LoadError(f'--factory was given but "{target}" is not callable')
        app = app()
    if not callable(app):
        raise LoadError(f'"{target}" is not callable, so it is neither an ASGI nor a WSGI application')
    if protocol == "auto":
        protocol = detect(app)
        if protocol is None:
            raise LoadError(f'cannot tell whether "{target}" is ASGI or WSGI: pass --protocol asgi or --protocol wsgi')
    else:
        problem = contradiction(app, protocol)
        if problem:
            raise ProtocolMismatch(f'--protocol {protocol} does not fit "{target}": {problem}')
    return app, protocol


def contradiction(app, protocol):
    """Why app cannot be called as protocol, or None; None too when its signature cannot tell.

    Only what is certain counts: a wrapper taking *args, or one whose signature cannot be read, may
    serve either protocol, which is what --protocol is for. The wrapper's own signature is read, not
    the one functools.wraps copied from what it wraps.
    """
    call = app if inspect.isfunction(app) or inspect.ismethod(app) else getattr(app, "__call__", app)
    coroutine = inspect.iscoroutinefunction(app) or inspect.iscoroutinefunction(call)
    if protocol == "wsgi" and coroutine:
        return "it is a coroutine function (async def), which is ASGI; WSGI calls it without awaiting it"
    try:
        parameters = inspect.signature(app, follow_wrapped=False).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in parameters):
        return None
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = sum(1 for p in positional if p.default is p.empty)
    wanted = 2 if protocol == "wsgi" else 3
    if required <= wanted <= len(positional):
        return None
    return f"it takes {_arguments(required, len(positional))} positional arguments, and {protocol.upper()} passes {wanted}"


def _arguments(required, most):
    return str(required) if required == most else f"{required} to {most}"


def detect(app):
    """A coroutine function, or a callable of three positional parameters, is ASGI; two is WSGI."""
    call = app if inspect.isfunction(app) or inspect.ismethod(app) else getattr(app, "__call__", app)
    if inspect.iscoroutinefunction(app) or inspect.iscoroutinefunction(call):
        return "asgi"
    try:
        signature = inspect.signature(app)
    except (TypeError, ValueError):
        return None
    positional = [
        p for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if any(p.kind == p.VAR_POSITIONAL for p in signature.parameters.values()):
        return None
    return {3: "asgi", 2: "wsgi"}.get(len(positional))
