"""Every public function and class of attnbook carries one docstring format, numpydoc: a one-line summary,
``Parameters`` naming exactly the signature's parameters in order, ``Returns`` (or ``Yields``) when something
comes back, and ``Examples`` with a doctest (run by ``pytest --doctest-modules``). Classes document their
fields under ``Attributes`` (or ``Parameters``). A name a module defines outside its ``__all__`` is private
(``_name``) or an unchecked kernel, whose docstring says so in its first words."""

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import textwrap
import warnings

import pytest
from numpydoc.docscrape import NumpyDocString

import attnbook


def _modules():
    yield attnbook
    for info in pkgutil.walk_packages(attnbook.__path__, "attnbook."):
        yield importlib.import_module(info.name)


MODULES = list(_modules())


def _defined_here(module, obj) -> bool:
    return (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", None) == module.__name__


PUBLIC = {f"{module.__name__}.{name}": getattr(module, name)
          for module in MODULES for name in getattr(module, "__all__", ())
          if _defined_here(module, getattr(module, name))}


def _parse(qualname: str, obj) -> NumpyDocString:
    """The numpydoc sections of ``obj``'s docstring; a malformed or unknown section fails, naming ``qualname``."""
    doc = inspect.getdoc(obj)
    assert doc, f"{qualname} has no docstring"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpydoc warns on an unknown section, a typo such as "Return"
        try:
            return NumpyDocString(doc)
        except Exception as error:  # numpydoc's ParseError, or the warning turned into an error
            pytest.fail(f"{qualname}: the docstring is not numpydoc: {error}")


def _documented_names(section) -> list[str]:
    """Names a ``Parameters``/``Attributes`` section documents; ``a, b : int`` documents two, ``\\*args`` one."""
    return [name.strip().replace("\\", "") for entry in section for name in entry.name.split(",")]


def _signature_names(obj) -> list[str]:
    names = []
    for parameter in inspect.signature(obj).parameters.values():
        if parameter.name in ("self", "cls"):
            continue
        stars = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}.get(parameter.kind, "")
        names.append(stars + parameter.name)
    return names


def _field_names(cls) -> list[str] | None:
    """The fields of a NamedTuple or dataclass, in order; None for another class."""
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return list(cls._fields)
    if dataclasses.is_dataclass(cls):
        return [field.name for field in dataclasses.fields(cls)]
    return None


def _gives_back(function) -> str | None:
    """``"Returns"`` when the body returns a value, ``"Yields"`` when it yields, None when it returns nothing."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    body = tree.body[0]
    nodes, found = list(body.body), None
    while nodes:  # the function's own statements, not those of functions or classes nested in it
        node = nodes.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return "Yields"
        if isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            found = "Returns"
        nodes.extend(ast.iter_child_nodes(node))
    return found


def _problems(qualname: str, obj) -> list[str]:
    """What is missing from or mismatched in ``obj``'s docstring, each naming the section."""
    doc, problems = _parse(qualname, obj), []
    if not doc["Summary"]:
        problems.append("no one-line summary")
    elif len(doc["Summary"]) > 1:
        problems.append(f"the summary runs over {len(doc['Summary'])} lines; it must be one line, then a blank line")
    if inspect.isclass(obj):
        fields = _field_names(obj)
        if fields is None:  # a plain class: Parameters documents its constructor
            section, expected = "Parameters", _signature_names(obj)
        else:  # a NamedTuple or dataclass: its fields, as Attributes (or Parameters)
            section, expected = ("Attributes" if doc["Attributes"] else "Parameters"), fields
        documented = _documented_names(doc[section])
        if not doc[section]:
            problems.append(f"no {'Attributes (or Parameters)' if fields is not None else 'Parameters'} section "
                            f"documenting the class's {'fields' if fields is not None else 'arguments'} {expected}")
        elif documented != expected:
            problems.append(f"the {section} section documents {documented}, but the class has {expected} (in order)")
    else:
        documented, expected = _documented_names(doc["Parameters"]), _signature_names(obj)
        if expected and not doc["Parameters"]:
            problems.append(f"no Parameters section (the signature has {expected})")
        elif documented != expected:
            problems.append(f"the Parameters section documents {documented}, but the signature has {expected} "
                            "(in order)")
        gives = _gives_back(obj)
        if gives is not None and not doc[gives]:
            problems.append(f"no {gives} section, but the function {gives.lower()[:-1]}s a value")
    examples = "\n".join(doc["Examples"])
    if not examples:
        problems.append("no Examples section")
    elif ">>>" not in examples:
        problems.append("the Examples section has no doctest (a '>>>' line)")
    return problems


@pytest.mark.parametrize("qualname", sorted(PUBLIC))
def test_every_public_name_has_a_numpydoc_docstring(qualname):
    problems = _problems(qualname, PUBLIC[qualname])
    assert not problems, f"{qualname}: " + "; ".join(problems)


def test_the_walk_covers_the_core_and_the_companions():
    # every module of the package is walked, and the public names of both tiers are checked
    assert {"attnbook.positional", "attnbook.efficient.tiled", "attnbook.learning.models.recall",
            "attnbook.book.prose", "attnbook.homework"} <= {module.__name__ for module in MODULES}
    assert {"attnbook.positional.sinusoidal_encoding", "attnbook.efficient.kv_cache.KVCache",
            "attnbook.book.prose.glue_number"} <= set(PUBLIC)


@pytest.mark.parametrize("module", [m for m in MODULES if not hasattr(m, "__path__")], ids=lambda m: m.__name__)
def test_every_module_lists_its_public_names(module):
    assert hasattr(module, "__all__"), f"{module.__name__} has no __all__"
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{module.__name__}.__all__ names what the module does not define: {missing}"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_other_function_is_private_or_an_unchecked_kernel(module):
    unmarked = [name for name, obj in vars(module).items()
                if inspect.isfunction(obj) and _defined_here(module, obj) and not name.startswith("_")
                and name not in getattr(module, "__all__", ())
                and not (inspect.getdoc(obj) or "").startswith("Unchecked kernel")]
    assert not unmarked, (
        f"{module.__name__}: {unmarked} are neither in __all__ nor private, and their docstrings do not "
        "start 'Unchecked kernel'")


# the checker checks: docstrings it must refuse, each with the message that names what is wrong

def _bad_parameters(x, y):
    """Add.

    Parameters
    ----------
    y : float
        The second.
    x : float
        The first.

    Returns
    -------
    float
        The sum.

    Examples
    --------
    >>> _bad_parameters(1, 2)
    3
    """
    return x + y


def _no_returns(x):
    """Double.

    Parameters
    ----------
    x : float
        A number.

    Examples
    --------
    >>> _no_returns(1)
    2
    """
    return 2 * x


def _no_doctest(*args, **kwargs):
    """Nothing.

    Parameters
    ----------
    *args, **kwargs
        Ignored.

    Examples
    --------
    Call it.
    """


@pytest.mark.parametrize("function, message", [
    (_bad_parameters, "documents ['y', 'x'], but the signature has ['x', 'y']"),
    (_no_returns, "no Returns section"),
    (_no_doctest, "the Examples section has no doctest"),
])
def test_the_check_names_the_function_and_the_missing_section(function, message, monkeypatch):
    monkeypatch.setitem(PUBLIC, function.__name__, function)
    with pytest.raises(AssertionError, match=r"^" + function.__name__ + r": ") as error:
        test_every_public_name_has_a_numpydoc_docstring(function.__name__)
    assert message in str(error.value)


def test_the_check_reads_star_args_and_grouped_names():
    doc = NumpyDocString(inspect.getdoc(_no_doctest))
    assert _documented_names(doc["Parameters"]) == _signature_names(_no_doctest) == ["*args", "**kwargs"]
    assert _gives_back(_no_doctest) is None and _gives_back(_no_returns) == "Returns"
