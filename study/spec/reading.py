"""Find a study file and read it into a `Doc`: the YAML data and the line of every field.

PyYAML's plain loader forgets where things were written, so the file is composed into its
node tree first; the node marks give each field's line, then the tree is constructed into
ordinary data. The loader is the project's one YAML reading (trainables/yaml_reading.py:
`1e-5` is a number, `off` a word). Two equal keys in one mapping, which PyYAML would silently
collapse, are an error here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from study.folder_names import name_problem
from study.spec.document import Doc, FieldPath, SpecError, dotted, suggest
from study.spec.keys import TOP_LEVEL_KEYS
from study.spec.profiles import check_profiles
from trainables.errors import joined
from trainables.input_files import MAX_SETTINGS_BYTES, read_bounded
from trainables.yaml_reading import Loader, YamlLimitError

# the studies shipped with the package: in a checkout a link to search_spaces/ at its root
SEARCH_SPACES = Path(__file__).resolve().parents[1] / "search_spaces"
# a researcher's own studies, looked up before the shipped ones (relative to the working folder)
LOCAL_SEARCH_SPACES = Path("search_spaces")


def study_folders(folder: Path | None = None) -> list[Path]:
    """Where a study name is looked up, in order: `folder` alone when given, else
    `./search_spaces/` then the shipped studies (one entry when they are the same folder, as
    in a checkout's root)."""
    if folder is not None:
        return [Path(folder)]
    folders: list[Path] = []
    for candidate in (LOCAL_SEARCH_SPACES, SEARCH_SPACES):
        if candidate.is_dir() and all(not candidate.samefile(f) for f in folders):
            folders.append(candidate)
    return folders


def study_files(folder: Path | None = None) -> dict[str, Path]:
    """Each study name and the file it resolves to, the first folder in `study_folders` that
    has it winning."""
    found: dict[str, Path] = {}
    for place in study_folders(folder):
        for path in sorted(place.glob("*.yaml")):
            if path.is_file():
                found.setdefault(path.stem, path)
    return dict(sorted(found.items()))


def known_studies(folder: Path | None = None) -> list[str]:
    """Study names (file stems) in `folder`, or where `study_folders` looks, for listings and
    'unknown study' messages."""
    return list(study_files(folder))


def find_study(name_or_path: str, folder: Path | None = None) -> Path:
    """A path (a name ending in .yaml/.yml or holding a slash) as it is; a name in
    `study_folders(folder)`."""
    if name_or_path.endswith((".yaml", ".yml")) or os.sep in name_or_path or "/" in name_or_path:
        path = Path(name_or_path).expanduser()
        if not path.exists():  # one that is no regular file is refused when it is read
            raise SpecError(f"{name_or_path}: no such study file")
        return _named(path)
    path = study_files(folder).get(name_or_path)
    if path is not None:
        return _named(path)
    names = tuple(known_studies(folder))
    places = " or ".join(display_path(place) for place in study_folders(folder)) or "(none)"
    raise SpecError(f"unknown study {name_or_path!r}{suggest(name_or_path, names)}; known "
                    f"studies in {places}: {', '.join(names) or '(none)'}")  # fmt: skip


def _named(path: Path) -> Path:
    """`path`, when its stem can name the study's folders under --reports and --storage."""
    problem = name_problem(path.stem)
    if problem:
        raise SpecError(
            f"{display_path(path)}: the study's name {path.stem!r} (the file's name without "
            f".yaml) cannot name its folders; rename the file: {problem}"
        )
    return path


def display_path(path: Path) -> str:
    """How messages show a file: relative to the working folder when it is below it."""
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(resolved)


def read_study(path: Path) -> Doc:
    """The file's data with its lines; its top-level keys and profiles checked."""
    display = display_path(path)
    # a regular file of at most MAX_SETTINGS_BYTES, looked up before a byte is read
    limits = {"what": "a study file", "max_bytes": MAX_SETTINGS_BYTES, "error": SpecError}
    raw = read_bounded(path, display, **limits)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise SpecError(f"{display}:{line}: not UTF-8 text ({err.reason} at byte "
                        f"{err.start}); save the study file as UTF-8") from None  # fmt: skip
    data, lines = _parse_yaml(text, display)
    doc = Doc(display, data, lines)
    if not isinstance(data, dict):
        raise doc.bad((), data, "a mapping of study settings (description, model, grid, ...)")
    doc.check_keys((), data, TOP_LEVEL_KEYS)
    check_profiles(doc)
    return doc


def _parse_yaml(text: str, display: str) -> tuple[Any, dict[FieldPath, int]]:
    """Safe-load the text keeping its node tree, whose marks give each field's line."""
    try:
        loader = Loader(text)  # checks the characters first: a NUL is refused here
    except yaml.reader.ReaderError as err:
        line = text.count("\n", 0, err.position) + 1
        problem = f"{joined(err.reason)} (character U+{err.character:04X})"
        raise SpecError(f"{display}:{line}: {problem}; a study file is plain text") from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise SpecError(f"{display}:1: the file is empty; expected a study mapping")
        _check_duplicate_keys(node, display, ())
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as err:
        raise SpecError(_syntax_message(err, display)) from None
    except yaml.YAMLError as err:
        raise SpecError(f"{display}:1: YAML syntax error: {joined(str(err))}") from None
    finally:
        loader.dispose()
    return data, _node_lines(node, (), {}, set())


def _syntax_message(err: yaml.MarkedYAMLError, display: str) -> str:
    mark = err.problem_mark or err.context_mark
    where = f"{mark.line + 1}:{mark.column + 1}" if mark else "1"
    problem = ": ".join(part for part in (err.context, err.problem) if part)
    limit = isinstance(err, YamlLimitError)
    kind = "too much for a study file" if limit else "YAML syntax error"
    return f"{display}:{where}: {kind}: {joined(problem or str(err))}"


def _check_duplicate_keys(node: yaml.Node, display: str, path: FieldPath) -> None:
    # PyYAML silently keeps the last of two equal keys; a repeated `fixed:` would lose settings.
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            if key.tag == "tag:yaml.org,2002:merge" or not isinstance(key, yaml.ScalarNode):
                continue
            line = key.start_mark.line + 1
            if key.value in first:
                name = dotted((*path, key.value))
                raise SpecError(
                    f"{display}:{line}: {name}: duplicate key (first written at line "
                    f"{first[key.value]}); write each key once"
                )
            first[key.value] = line
            _check_duplicate_keys(value, display, (*path, key.value))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _check_duplicate_keys(item, display, (*path, index))


def _node_lines(
    node: yaml.Node, path: FieldPath, out: dict[FieldPath, int], stack: set[int]
) -> dict[FieldPath, int]:
    """Map each field path to its 1-based line: a key's line for mapping entries, the item's
    line for list items. `stack` guards against recursive YAML aliases."""
    out.setdefault(path, node.start_mark.line + 1)
    if id(node) in stack:
        return out
    stack.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = (*path, str(key.value))
            out[child] = key.start_mark.line + 1
            _node_lines(value, child, out, stack)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _node_lines(item, (*path, index), out, stack)
    stack.discard(id(node))
    return out
