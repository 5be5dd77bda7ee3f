# Sourced by the scripts that time whole runs of the workload kit (measure_runs.sh, workloads.sh).

# warn_unless_tmpfs DIR: ext4 without a journal (this VM's disk) charges a run that creates
# thousands of files soon after the previous run deleted them (ant, javac) seconds of system
# time (the kernel skips recently deleted inodes), which falls on whichever run comes second, so
# runs are timed on a tmpfs; says so on stderr when DIR is not on one.
warn_unless_tmpfs() {
  [[ $(stat -f -c %T "$1" 2>/dev/null) == tmpfs ]] ||
    echo "note: WL_DIR=$1 is not on a tmpfs: ant's and javac's times may include seconds of file-system work (WL_DIR=/dev/shm/lucce-workloads avoids it; see README, Performance, for lucene_search's index there)" >&2
}
