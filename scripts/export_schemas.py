"""Write schemas/<table>.json from auditor.sinks.schemas (run after changing a schema)."""

from __future__ import annotations

import json
from pathlib import Path

from auditor.sinks.schemas import OUTPUT_TABLES

if __name__ == "__main__":
    out = Path(__file__).resolve().parents[1] / "schemas"
    out.mkdir(exist_ok=True)
    for name, schema in OUTPUT_TABLES.items():
        (out / f"{name}.json").write_text(json.dumps(schema.jsonValue(), indent=2) + "\n", encoding="utf-8")
        print(f"wrote schemas/{name}.json")
