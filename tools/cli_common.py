"""What the scripts in tools/ share on their command line: sizes in the
syntax of the gds configuration (the package's parser,
python/src/h5gds/_sizes.py, loaded by path: neither the package nor h5py
need be installed), and argparse errors in one line (exit status 2)."""
import argparse
import importlib.util
import pathlib
import sys

_spec = importlib.util.spec_from_file_location(
    "h5gds_sizes", pathlib.Path(__file__).resolve().parent.parent / "python" / "src" / "h5gds" / "_sizes.py")
_sizes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_sizes)
SizeError, parse_size, SIZE_SYNTAX = _sizes.SizeError, _sizes.parse_size, _sizes.SIZE_SYNTAX


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are one line (what is wrong), exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (--help for usage)\n")


def size_arg(text):
    """argparse type: one positive size."""
    try:
        n = parse_size(text)
    except SizeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if n == 0:
        raise argparse.ArgumentTypeError(f"size {text!r} must be more than 0 bytes")
    return n


def size_list_arg(text):
    """argparse type: a comma list of positive sizes."""
    return [size_arg(item) for item in text.split(",")]


def int_list_arg(minimum):
    """argparse type: a comma list of whole numbers >= minimum."""
    def parse(text):
        out = []
        for item in text.split(","):
            try:
                n = int(item)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{item!r} is not a whole number") from None
            if n < minimum:
                raise argparse.ArgumentTypeError(f"{item!r} is less than {minimum}")
            out.append(n)
        return out
    return parse


def int_arg(minimum):
    """argparse type: a whole number >= minimum."""
    one = int_list_arg(minimum)

    def parse(text):
        if "," in text:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
        return one(text)[0]
    return parse


def float_arg(minimum, strict=True):
    """argparse type: a finite number > minimum (>= when not strict)."""
    def parse(text):
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (v > minimum if strict else v >= minimum) or v == float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r} is not {'more than' if strict else 'at least'} {minimum:g}")
        return v
    return parse


def fail(prog, message, status=2):
    """One line on stderr, then exit."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(status)
