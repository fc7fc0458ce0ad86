"""Example Airflow DAG: audit a Kafka cluster every hour and page on critical findings.

Copy to your DAGs folder and adjust the paths. The first task collects a snapshot on each
broker (scripts/collect-broker-snapshot.sh, e.g. over SSH) into SNAPSHOT_ROOT/<ts>/; the
second audits it with spark-submit into one Delta location that dashboards read.
``--incremental`` parses only the dump files that changed since the earlier hours (rolled
segments are parsed once; the store under OUT/_auditor/store keeps them, README
"Scheduling"): OUT must then be a local or mounted path.

Exit status of the audit: 0 clean, 1 a finding at or above --fail-on (the task fails, so
Airflow's on_failure_callback / alerting pages someone), 2 bad input or a failed run (also
a failure, with a FAILED row in the `runs` table). Re-running a task re-uses its run id
({{ run_id }}), which replaces that run's rows instead of duplicating them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator

SNAPSHOT_ROOT = "/data/kafka-snapshots/prod-eu"
OUT = "/data/audit"            # local or mounted (DBFS, NFS): the write lock and the incremental store need it
AUDITOR = "/opt/log-auditor"   # a checkout of this repository, with its wheel built in dist/

with DAG(
    dag_id="kafka_log_audit_prod_eu",
    start_date=datetime(2026, 1, 1),
    schedule=timedelta(hours=1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=5)},
    tags=["kafka", "audit"],
) as dag:
    collect = BashOperator(
        task_id="collect_snapshot",
        bash_command=(
            "for b in 1 2 3; do ssh kafka-$b "
            f"'{AUDITOR}/scripts/collect-broker-snapshot.sh --broker-id $b "
            "--log-dirs /var/lib/kafka/data --out /tmp/snap --kafka-bin /opt/kafka/bin' && "
            f"rsync -a kafka-$b:/tmp/snap/ {SNAPSHOT_ROOT}/{{{{ ts_nodash }}}}/; done"
        ),
    )
    audit = BashOperator(
        task_id="audit_snapshot",
        bash_command=(
            "spark-submit --master yarn --deploy-mode client "
            f"--py-files {AUDITOR}/dist/log_auditor-0.1.0-py3-none-any.whl "
            "--packages io.delta:delta-spark_2.13:4.0.0 "
            "--conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension "
            "--conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog "
            f"{AUDITOR}/jobs/audit.py {SNAPSHOT_ROOT}/{{{{ ts_nodash }}}} --out {OUT} "
            "--cluster prod-eu --snapshot {{ ts }} --run-id {{ run_id | replace('+', '_') }} --fail-on critical "
            "--incremental"
        ),
    )
    collect >> audit
