-- Example dashboard queries over the auditor's Delta tables (SPEC section 6).
-- Plain SQL that Databricks SQL, Spark SQL and DuckDB all run; tests/test_run.py runs
-- every query against the tables a real audit writes. Each query starts with a
-- "-- name:" line. Only runs with a SUCCEEDED row count: a half-written or failed run
-- never shows. Filters on cluster and day prune the tables' partitions.

-- name: latest_successful_run
-- The latest successful run of each cluster: is the auditor itself running?
SELECT cluster, run_id, started_at, finished_at
FROM (
  SELECT cluster, run_id, started_at, finished_at,
         row_number() OVER (PARTITION BY cluster ORDER BY started_at DESC) AS rn
  FROM runs
  WHERE status = 'SUCCEEDED'
) ranked
WHERE rn = 1
ORDER BY cluster;

-- name: open_findings_by_severity
-- Unsuppressed findings of each cluster's latest successful run, by severity; "new" ones
-- were first seen in that run's snapshot (first_seen carries over from earlier runs).
SELECT f.cluster, f.severity, count(*) AS findings,
       sum(CASE WHEN f.first_seen = f.snapshot THEN 1 ELSE 0 END) AS new_findings
FROM findings f
JOIN (
  SELECT cluster, run_id
  FROM (
    SELECT cluster, run_id, row_number() OVER (PARTITION BY cluster ORDER BY started_at DESC) AS rn
    FROM runs WHERE status = 'SUCCEEDED'
  ) ranked
  WHERE rn = 1
) latest ON f.cluster = latest.cluster AND f.run_id = latest.run_id
WHERE NOT f.suppressed
GROUP BY f.cluster, f.severity
ORDER BY f.cluster,
         CASE f.severity WHEN 'CRITICAL' THEN 1 WHEN 'ERROR' THEN 2 WHEN 'WARNING' THEN 3 ELSE 4 END;

-- name: partitions_with_divergence
-- Followers whose log differs from their leader's, in successful runs of the last 30 days.
SELECT r.cluster, r.snapshot, r.topic, r.partition, r.replica, r.status,
       r.divergence_offset, r.truncation_offset, r.records_to_truncate
FROM replica_status r
JOIN runs ok ON ok.run_id = r.run_id AND ok.cluster = r.cluster AND ok.status = 'SUCCEEDED'
WHERE r.divergence_offset IS NOT NULL
  AND r.day >= current_date - INTERVAL 30 DAY
ORDER BY r.cluster, r.snapshot DESC, r.topic, r.partition, r.replica;

-- name: hwm_over_time
-- The highest HWM and the leader of every partition per snapshot: a time series to plot
-- (a falling line is what HWM_REGRESSION and STALE_LEADER_HWM report).
SELECT p.cluster, p.topic, p.partition, p.snapshot, p.leader, p.leader_epoch,
       p.max_high_watermark, p.leader_log_end_offset, p.worst_severity
FROM partition_status p
JOIN runs ok ON ok.run_id = p.run_id AND ok.cluster = p.cluster AND ok.status = 'SUCCEEDED'
WHERE p.day >= current_date - INTERVAL 30 DAY
ORDER BY p.cluster, p.topic, p.partition, p.snapshot;

-- name: findings_first_seen
-- When each still-open problem first appeared (one row per finding identity).
SELECT f.cluster, f.topic, f.partition, f.replica, f.check, f.severity,
       min(f.first_seen) AS first_seen, max(f.snapshot) AS last_seen, count(DISTINCT f.run_id) AS runs
FROM findings f
JOIN runs ok ON ok.run_id = f.run_id AND ok.cluster = f.cluster AND ok.status = 'SUCCEEDED'
WHERE NOT f.suppressed AND f.severity IN ('CRITICAL', 'ERROR', 'WARNING')
GROUP BY f.cluster, f.topic, f.partition, f.replica, f.check, f.severity
ORDER BY first_seen;
