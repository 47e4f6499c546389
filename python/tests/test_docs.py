"""Every public class, function, method and property of the package has a docstring."""

import inspect

import typedecide as td


def test_docstrings():
    missing = []
    for name in td.__all__:
        obj = getattr(td, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not inspect.getdoc(obj):
            missing.append(name)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not (inspect.isfunction(member) or isinstance(member, (property,
                                                                                                  classmethod))):
                    continue
                doc = member.__func__.__doc__ if isinstance(member, classmethod) else member.__doc__
                if not doc:
                    missing.append("%s.%s" % (name, attr))
    assert not missing, "no docstring: " + ", ".join(missing)
