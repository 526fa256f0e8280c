"""Parameters of another implementation in a framework model: loading a reference, mapping names.

A reference is a ``file.py:factory`` or ``package.module:factory`` callable returning an
``nn.Module``, and/or a state_dict file. Its parameters are mapped onto the framework model's:
first by an explicit mapping file (``reference_name -> framework_name`` per line, as printed), then
by name after the regex ``rules`` (``"FC_var=>log_var"``), then the rest by shape in order of
appearance. Whatever stays unmapped, and every shape mismatch, is reported: nothing is dropped
silently.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from framework.base.errors import ConfigError
from framework.training.checkpoint import load_verified


def load_object(spec: str) -> Any:
    """``path/to/file.py:Name`` or ``package.module:Name``."""
    source, _, name = spec.rpartition(":")
    if not source or not name:
        raise ConfigError(f"{spec!r} is not of the form 'file.py:factory' or 'package.module:factory'.")
    if source.endswith(".py"):
        if not os.path.isfile(source):
            raise ConfigError(f"{spec!r}: there is no file {source!r}.")
        module_spec = importlib.util.spec_from_file_location(os.path.basename(source)[:-3], source)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(source)
    if not hasattr(module, name):
        raise ConfigError(f"{spec!r}: {source} has no {name!r}.")
    return getattr(module, name)


def load_reference(factory: str | None, state_dict_path: str | None) -> tuple[nn.Module | None, dict[str, Any]]:
    """The reference model (if a factory is given) and its state_dict (the file's, if given, loaded into it)."""
    if factory is None and state_dict_path is None:
        raise ConfigError("Give the reference as --reference file.py:factory and/or --state-dict file.pt.")
    state = None
    if state_dict_path is not None:
        if not os.path.isfile(state_dict_path):
            raise ConfigError(f"--state-dict {state_dict_path}: there is no such file.")
        state = load_verified(state_dict_path)  # CheckpointError if damaged, as wherever a checkpoint is read
        if isinstance(state, dict) and "model" in state and "epoch" in state:  # a framework checkpoint
            state = state["model"]
        if not isinstance(state, dict):
            raise ConfigError(f"{state_dict_path} holds a {type(state).__name__}, not a state_dict.")
    if factory is None:
        return None, state
    model = load_object(factory)()
    if not isinstance(model, nn.Module):
        raise ConfigError(f"{factory} returned a {type(model).__name__}, not an nn.Module.")
    if state is not None:
        try:
            model.load_state_dict(state)
        except RuntimeError as exc:  # missing/unexpected keys or shapes: torch lists them
            raise ConfigError(f"{state_dict_path} does not fit the model of {factory}: {exc}") from None
    return model, model.state_dict()


def parse_rule(text: str) -> tuple[str, str]:
    """``"regex=>replacement"``."""
    if "=>" not in text:
        raise ConfigError(f"rule {text!r} is not of the form 'regex=>replacement', e.g. '^Encoder\\.FC_=>encoder.'.")
    pattern, replacement = text.split("=>", 1)
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"rule {text!r}: {pattern!r} is not a regular expression ({exc}).") from None
    return pattern, replacement


def apply_rules(name: str, rules: Iterable[tuple[str, str]]) -> str:
    """``name`` after every rule, in order."""
    for pattern, replacement in rules:
        name = re.sub(pattern, replacement, name)
    return name


@dataclass
class ParamMapping:
    """Which reference tensor goes to which framework tensor, and how that was decided."""

    pairs: list[tuple[str, str, str]] = field(default_factory=list)  # (reference, framework, how)
    unmapped_reference: list[str] = field(default_factory=list)
    unmapped_framework: list[str] = field(default_factory=list)
    shape_mismatches: list[tuple[str, str, tuple, tuple]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not (self.unmapped_reference or self.unmapped_framework or self.shape_mismatches)

    def framework_name(self, reference_name: str) -> str | None:
        return next((f for r, f, _ in self.pairs if r == reference_name), None)

    def problems(self) -> str:
        """One paragraph listing what is not mapped."""
        parts = []
        if self.shape_mismatches:
            parts.append(
                "shape mismatch: "
                + "; ".join(f"{r} {list(rs)} vs {f} {list(fs)}" for r, f, rs, fs in self.shape_mismatches)
            )
        if self.unmapped_reference:
            parts.append("reference tensors without a place: " + ", ".join(self.unmapped_reference))
        if self.unmapped_framework:
            parts.append("framework tensors without a value: " + ", ".join(self.unmapped_framework))
        return ". ".join(parts)


def map_parameters(
    reference: dict[str, torch.Tensor],
    framework: dict[str, torch.Tensor],
    rules: list[tuple[str, str]] = (),
    explicit: dict[str, str] | None = None,
) -> ParamMapping:
    """Map reference tensors onto framework tensors: explicit pairs, then names after ``rules``, then shape and order."""
    mapping = ParamMapping()
    left_ref = [n for n in reference if not _is_counter(reference[n])]
    left_fw = [n for n in framework if not _is_counter(framework[n])]

    def take(ref_name: str, fw_name: str, how: str) -> None:
        left_ref.remove(ref_name)
        left_fw.remove(fw_name)
        ref_shape, fw_shape = tuple(reference[ref_name].shape), tuple(framework[fw_name].shape)
        if ref_shape != fw_shape:
            mapping.shape_mismatches.append((ref_name, fw_name, ref_shape, fw_shape))
        else:
            mapping.pairs.append((ref_name, fw_name, how))

    for ref_name, fw_name in (explicit or {}).items():
        if ref_name not in left_ref or fw_name not in left_fw:
            raise ConfigError(
                f"mapping file: {ref_name} -> {fw_name} names a tensor that does not exist or is mapped twice."
            )
        take(ref_name, fw_name, "file")
    for ref_name in list(left_ref):
        renamed = apply_rules(ref_name, rules)
        if renamed in left_fw:
            take(ref_name, renamed, "name" if renamed == ref_name else "rule")
    for ref_name in list(left_ref):
        shape = tuple(reference[ref_name].shape)
        match = next((f for f in left_fw if tuple(framework[f].shape) == shape), None)
        if match is not None:
            take(ref_name, match, "shape+order")
    if len(left_ref) == len(left_fw):  # the same layers with other sizes: say which shapes differ
        for ref_name, fw_name in list(zip(left_ref, left_fw, strict=True)):
            take(ref_name, fw_name, "order")
    mapping.unmapped_reference, mapping.unmapped_framework = left_ref, left_fw
    return mapping


def map_with_options(
    reference: dict[str, torch.Tensor],
    framework: dict[str, torch.Tensor],
    rule_texts: list[str],
    mapping_file: str | None,
) -> tuple[ParamMapping, list[tuple[str, str]]]:
    """``map_parameters`` from the tools' ``--rule`` texts and ``--mapping`` file; also returns the parsed rules."""
    rules = [parse_rule(text) for text in rule_texts]
    explicit = read_mapping_file(mapping_file) if mapping_file else None
    return map_parameters(reference, framework, rules, explicit), rules


def _is_counter(t: torch.Tensor) -> bool:
    """BatchNorm's ``num_batches_tracked``: bookkeeping, not a parameter to map by shape."""
    return t.dim() == 0 and not t.is_floating_point()


def format_mapping(mapping: ParamMapping, reference: dict[str, torch.Tensor]) -> str:
    """The table the import prints; its ``->`` lines are also a mapping file."""
    width = max((len(r) for r, _, _ in mapping.pairs), default=10)
    fw_width = max((len(f) for _, f, _ in mapping.pairs), default=10)
    lines = [f"{r:<{width}} -> {f:<{fw_width}}  # {list(reference[r].shape)}, by {how}" for r, f, how in mapping.pairs]
    return "\n".join(lines)


def read_mapping_file(path: str) -> dict[str, str]:
    """``reference -> framework`` lines (``#`` starts a comment)."""
    pairs = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if "->" not in line:
                raise ConfigError(f"{path}:{number}: expected 'reference_name -> framework_name', got {line!r}.")
            ref_name, fw_name = (part.strip() for part in line.split("->", 1))
            pairs[ref_name] = fw_name
    return pairs


def mapped_state_dict(mapping: ParamMapping, reference: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The framework-named state_dict holding the reference's values."""
    return {fw_name: reference[ref_name].detach().clone() for ref_name, fw_name, _ in mapping.pairs}
