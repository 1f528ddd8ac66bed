"""The published numbers: the docs' generated blocks written from results files and archives (`make report`),
and the check that a run's numbers match them (`make report-check`, the demo's last line)."""
