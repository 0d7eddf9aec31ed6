"""h5gds._sizes: the size syntax of the driver's configuration, in Python.
Checked against a table, then against the C parser itself (a configuration
key of the driver) on the table and on generated texts."""
import ctypes
import random

import h5py
import pytest

from h5gds._io import _set_fapl_gds
from h5gds._lib import native
from h5gds._sizes import SizeError, parse_size, parse_size_list

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40

GOOD = {
    "0": 0, "4096": 4096, "007": 7, "1B": 1, "12B": 12,
    "1K": KiB, "1k": KiB, "1KiB": KiB, "1kiB": KiB, "1KIB": KiB, "1KB": 1000, "1kB": 1000,
    "8M": 8 * MiB, "8MiB": 8 * MiB, "8MB": 8_000_000, "1g": GiB, "1GiB": GiB, "1GB": 10**9,
    "2T": 2 * TiB, "2TiB": 2 * TiB, "2TB": 2 * 10**12, "100KB": 100_000,
    "18446744073709551615": 2**64 - 1, "16777215T": 16777215 * TiB,
}
BAD = ["", "K", "-1", "+1", " 1", "1 ", "1 KiB", "1.5GiB", "1e3", "0x10", "1P", "1PiB", "1KiBB", "1Ki",
       "18446744073709551616", "16777216T", "1,2", "١", "1١"]
BITS = ["1b", "1kb", "1Kb", "1Mb", "1mib", "1KIb", "1gb", "1Tb"]


@pytest.mark.parametrize("text,value", sorted(GOOD.items()))
def test_good(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", BAD)
def test_bad(text):
    with pytest.raises(SizeError, match="is not a size|too large"):
        parse_size(text)


@pytest.mark.parametrize("text", BITS)
def test_lowercase_b_is_refused_as_bits(text):
    with pytest.raises(SizeError, match="lowercase b"):
        parse_size(text)


def test_message_is_one_line_naming_the_value():
    with pytest.raises(ValueError) as err:
        parse_size("12XB", "--batch")
    assert str(err.value).startswith("--batch '12XB'") and "\n" not in str(err.value)
    with pytest.raises(SizeError):
        parse_size(4096)  # type: ignore[arg-type]


def test_list():
    assert parse_size_list("4KiB,1MB,7") == [4096, 10**6, 7]
    for bad in ("", "4KiB,", ",4KiB", "4KiB,,1M", "4KiB;1M"):
        with pytest.raises(SizeError):
            parse_size_list(bad)


def _c_parse(text):
    """The C parser's answer for `text` (the key parallel_threshold, a size of
    0..1 TiB): its value, or None when refused."""
    plist = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    try:
        _set_fapl_gds(plist, f"parallel_threshold={text}")
    except ValueError:
        return None
    buf = ctypes.create_string_buffer(1024)
    assert native.h5gds_py_get_fapl(plist.id, buf, len(buf)) == 0
    fields = dict(kv.split("=") for kv in buf.value.decode().split(","))
    return int(fields["parallel_threshold"])


def _py_parse(text):
    try:
        v = parse_size(text)
    except SizeError:
        return None
    return v if v <= TiB else "out of range"


def _texts():
    yield from GOOD
    yield from BAD
    yield from BITS
    rng = random.Random(20261125)
    alphabet = "0123456789" * 3 + "kKmMgGtTpPiIbB .-+xe"
    for _ in range(3000):
        yield "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))


def test_same_answers_as_the_c_parser():
    for text in _texts():
        if "," in text or "=" in text or text.strip() != text or not text:
            continue  # the configuration string's own separators; spaces are trimmed by its key=value split
        c, py = _c_parse(text), _py_parse(text)
        if py == "out of range":
            assert c is None, text
        else:
            assert c == py, f"{text!r}: C {c}, Python {py}"
