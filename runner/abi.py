"""ABI fingerprint of a tool's argument schema, compatible with zigclaw's registry.

This module has no dependencies beyond the standard library: the build step
loads it by path to generate the built-in registry before the package exists.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

# zigclaw spelled these constraints differently; the fingerprint uses its names.
_CONSTRAINTS = (("maxLength", "max_length"), ("minimum", "min"), ("maximum", "max"))


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def abi_fingerprint(schema: Mapping[str, Any]) -> str:
    """Return the lowercase hex SHA-256 that zigclaw's registry records for an args schema.

    The text hashed is `kind=object;required=<names,>` then, per property sorted by
    name, `;prop=<name>:<type>` with optional `;max_length=`, `;min=`, `;max=`
    and always `;enum=<values,>`. `schema` may use either spelling.
    """
    required = sorted(str(name) for name in schema.get("required", []))
    parts = ["kind=object;required=", "".join(f"{name}," for name in required)]
    properties: Mapping[str, Any] = schema.get("properties", {}) or {}
    for name in sorted(properties):
        prop = properties[name] or {}
        parts.append(f";prop={name}:{_scalar(prop.get('type', ''))}")
        for json_key, zig_key in _CONSTRAINTS:
            value = prop.get(json_key, prop.get(zig_key))
            if value is not None:
                parts.append(f";{zig_key}={_scalar(value)}")
        values = sorted(_scalar(v) for v in prop.get("enum", []) or [])
        parts.append(";enum=" + "".join(f"{v}," for v in values))
    return hashlib.sha256("".join(parts).encode()).hexdigest()
