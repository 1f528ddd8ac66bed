"""The scorer lab: families of scorer trainings and searches on a world's trees, planned, run and reported.

command (the `make lab` command and its sub-commands plan, run, pilot, report), recipe and recipes/ (the lab's
families as data files), plan (a family's jobs on a world), job (a planned command as a record), rows (a label
scheme trained with an objective), estimate and dry_run (the plan's price, from the job records, and print-out), sweep_jobs / compute_match (the compute-matched sweep), pilot and power
(the dev pilot sizing a test split), cells, claims and report (the report's table and paired claims), finish (the
report from a run or an archive). The lab drives the pipeline only through its commands.
"""
