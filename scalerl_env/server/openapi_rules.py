"""The rules the reward server enforces beyond single fields, written into its OpenAPI document.

pydantic describes each field; the rules between fields are stated here, on the generated document,
so that a request the document calls valid is one the server accepts:
- a `domain` names an installed domain (`scalerl.env.contracts.domains`): an `enum` of the registry;
- a verify item (and an inline problem of a curriculum set, an episode's problem) is one branch per
  installed domain, the branch requiring the reference field its `DomainSpec` names (`answer` or `tests`), so a plug-in
  domain is documented, and validates, where it is installed;
- a curriculum set is registered from `parquet` or from `records`, exactly one (`oneOf`), with at least
  one training record;
- a verify request holds at most `limits.max_batch_items` items (the server's own setting);
- the tag of a discriminated union (a code test's `kind`) is required, as pydantic requires it.

Rules that JSON Schema cannot state (a rank below `world_size`, a reference its domain can read, SQL
the ledger runs) are written in the field's or the operation's description; the server answers them
with 422 naming the field (400 for SQL). Not guaranteed: that a future route's cross-field rule is
stated; `tests/env/test_server_fuzz.py` checks the document against the server.
"""

from __future__ import annotations

import copy
import re
import typing
from typing import Any

from scalerl.env.contracts.domains import domains
from scalerl.env.contracts.records import Domain

SCHEMAS = "#/components/schemas/"
_DOMAIN_DESCRIPTION = typing.get_args(Domain)[2].description
IDS_ONLY = ("prompt", "answer", "tests", "limits")  # what a set record without its problem leaves out


def state_rules(document: dict[str, Any], max_batch_items: int) -> dict[str, Any]:
    """`document` (FastAPI's, changed in place and returned) with the rules of the module docstring."""
    schemas = document.get("components", {}).get("schemas", {})
    names = list(domains())
    for schema in schemas.values():
        domain = schema.get("properties", {}).get("domain")
        if domain is not None and domain.get("description") == _DOMAIN_DESCRIPTION:
            domain["enum"] = names
    if "VerifyItem" in schemas:
        _per_domain(schemas, "VerifyItem")
        schemas["VerifyRequest"]["properties"]["items"]["maxItems"] = max_batch_items
    if "ProblemRecord" in schemas:  # the problem of POST /v1/episodes
        _per_domain(schemas, "ProblemRecord")
    if "SetRecord" in schemas:
        _per_domain(schemas, "SetRecord", ids_only=True)
        _one_source(schemas["RegisterSetRequest"])
    _tags_required(document, schemas)
    return document


def _tags_required(document: dict[str, Any], schemas: dict[str, Any]) -> None:
    """A discriminated union's tag is required in each member: pydantic picks the member by the tag and
    refuses an object without one, though the member's model gives the tag a default (`kind: stdio`)."""
    for node in _nodes(document):
        tag = node.get("discriminator", {}).get("propertyName")
        for ref in node.get("discriminator", {}).get("mapping", {}).values() if tag else ():
            member = schemas[ref.removeprefix(SCHEMAS)]
            member["required"] = sorted(set(member.get("required", [])) | {tag})


def _nodes(node: Any) -> Any:
    """Every object in a JSON document, depth first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)


def _per_domain(schemas: dict[str, Any], name: str, *, ids_only: bool = False) -> None:
    """`schemas[name]` becomes a `oneOf` over the installed domains (`name_<domain>` components); with
    `ids_only`, one more branch: the record without its problem (`prompt`, references, limits left out)."""
    base = schemas[name]
    branches, mapping = [], {}
    for domain_name, spec in domains().items():
        branch = copy.deepcopy(base)
        branch["title"] = f"{name} ({domain_name})"
        branch["properties"]["domain"] = {"const": domain_name, "type": "string", "description": spec.description}
        required = {"domain", spec.reference}
        if ids_only:  # a whole problem: the prompt and the reference
            required.add("prompt")
            branch["properties"]["prompt"] = _not_null(branch["properties"]["prompt"])
        branch["properties"][spec.reference] = _not_null(branch["properties"][spec.reference])
        branch["required"] = sorted(set(branch.get("required", [])) | required)
        key = f"{name}_{re.sub(r'[^A-Za-z0-9._-]', '_', domain_name)}"
        schemas[key] = branch
        mapping[domain_name] = SCHEMAS + key
        branches.append({"$ref": SCHEMAS + key})
    if not ids_only:
        schemas[name] = {"title": name, "description": base.get("description", ""), "oneOf": branches,
                         "discriminator": {"propertyName": "domain", "mapping": mapping}}
        return
    ids = copy.deepcopy(base)
    ids["title"] = f"{name} (ids only)"
    for field in IDS_ONLY:
        ids["properties"][field] = {"type": "null"}
    schemas[f"{name}_ids"] = ids
    schemas[name] = {"title": name, "description": base.get("description", ""),
                     "oneOf": [*branches, {"$ref": SCHEMAS + f"{name}_ids"}]}


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A property's schema without its `null` alternative (pydantic writes `X | None` as anyOf [X, null])."""
    options = [s for s in schema.get("anyOf", []) if s != {"type": "null"}]
    if len(options) != 1:
        return schema
    kept = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**kept, **options[0]}


def _one_source(request: dict[str, Any]) -> None:
    """RegisterSetRequest: `parquet` (optionally with `heldout_parquet`) or `records` holding a training
    record, exactly one."""
    train = {"properties": {"split": {"const": "train"}}}
    request["oneOf"] = [
        {"title": "from parquet", "required": ["parquet"],
         "properties": {"parquet": {"type": "string"}, "records": {"type": "null"}}},
        {"title": "from records", "required": ["records"],
         "properties": {"records": {"type": "array", "contains": train}, "parquet": {"type": "null"},
                        "heldout_parquet": {"type": "null"}}},
    ]
