"""spark-submit entry point: ``spark-submit jobs/audit.py SNAPSHOT --out OUT [options]``.

Thin on purpose: the options and the run are the package's (``auditor audit``); under
spark-submit the session spark-submit configured is reused.
"""

from __future__ import annotations

import sys

from auditor.cli import audit_command

if __name__ == "__main__":
    audit_command.main(args=sys.argv[1:], prog_name="jobs/audit.py")
