"""docs/design.md's ledger table names every table and view the ledger creates."""

from __future__ import annotations

import re

from scalerl.env.contracts.paths import REPO

CREATED = re.compile(r"CREATE (?:TABLE IF NOT EXISTS|OR REPLACE VIEW) (\w+)")


def test_the_design_doc_names_every_ledger_table_and_view():
    schema = (REPO / "curriculum" / "ledger" / "schema.py").read_text()
    design = (REPO / "docs" / "design.md").read_text()
    names = sorted(set(CREATED.findall(schema)))
    assert len(names) >= 10
    missing = [n for n in names if f"`{n}`" not in design]
    assert missing == [], f"docs/design.md's ledger table lacks {missing}"
