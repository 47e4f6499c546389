"""Slot maps: which token each option letter is, and which row of a pruned head holds it."""

import json

from .errors import FormatError

__all__ = ["SlotMap"]


class SlotMap:
    """Row i of a typed readout is letter ``letters[i]``, token ``keep[i]``; ``token_to_row`` is the inverse.

    The library writes one for every decider (``Decider.slot_map``), keeps one in a GGUF whose head was pruned to
    the letters (``Model.slot_map``) and returns one from ``Model.export(prune_letters=...)``. ``to_json()`` gives
    back the library's compact form byte for byte.
    """

    __slots__ = ("version", "model", "separator", "letters", "keep", "token_to_row")

    def __init__(self, letters, keep, *, separator=" ", model=None, version=1, token_to_row=None):
        if len(letters) != len(keep):
            raise FormatError("slot map: %d letters but %d kept tokens" % (len(letters), len(keep)))
        self.version = int(version)
        self.model = model
        self.separator = separator
        self.letters = str(letters)
        self.keep = [int(t) for t in keep]
        inverse = {t: row for row, t in enumerate(self.keep)}
        if len(inverse) != len(self.keep):
            raise FormatError("slot map: a token is kept twice: %s" % self.keep)
        if token_to_row is not None:
            given = {int(t): int(r) for t, r in token_to_row.items()}
            if given != inverse:
                raise FormatError("slot map: token_to_row %s is not the inverse of keep %s" % (given, self.keep))
        self.token_to_row = inverse

    @classmethod
    def from_dict(cls, d):
        """From the dict of ``to_dict()`` or the library's JSON object (``token_to_row`` keys may be strings)."""
        try:
            return cls(d["letters"], d["keep"], separator=d.get("separator", " "), model=d.get("model"),
                       version=d.get("version", 1), token_to_row=d.get("token_to_row"))
        except (KeyError, TypeError, ValueError) as e:
            raise FormatError("slot map: %s" % (e,)) from None

    @classmethod
    def from_json(cls, text):
        """From the library's JSON text."""
        return cls.from_dict(json.loads(text))

    def to_dict(self):
        """A dict of the library's JSON object (token_to_row keys as strings)."""
        return {"version": self.version, "model": self.model, "separator": self.separator, "letters": self.letters,
                "keep": list(self.keep), "token_to_row": {str(t): r for t, r in self.token_to_row.items()}}

    def to_json(self):
        """The library's form: compact, keys in its order."""
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    def row(self, token):
        """The row that holds ``token``, or None when the map does not keep it."""
        return self.token_to_row.get(int(token))

    def token(self, row_or_letter):
        """The token of a row (an int) or of an option letter (a one-character str)."""
        if isinstance(row_or_letter, str):
            row = self.letters.find(row_or_letter)
            if len(row_or_letter) != 1 or row < 0:
                raise KeyError(row_or_letter)
            return self.keep[row]
        return self.keep[row_or_letter]

    def __len__(self):
        return len(self.keep)

    def __eq__(self, other):
        return isinstance(other, SlotMap) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return "SlotMap(letters=%r, keep=%r, separator=%r)" % (self.letters, self.keep, self.separator)
