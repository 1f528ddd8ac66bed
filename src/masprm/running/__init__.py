"""Running the pipeline's commands from a driver (`make demo`, `make lab`): each command in a subprocess under the
pinned numerics, side by side as their needs allow (`commands`), and the run's archive packed at its end
(`run_archive`). The drivers' shared machinery, so that no module of `stages/` imports another."""
