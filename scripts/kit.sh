# Sourced (after REPO is set) by the scripts that run the workload kit: where the kit and its
# prepared directory are, and the tmpfs note for the scripts that time whole runs.
#   WL_KIT: the kit (default ../shared/workloads next to the repo, else /work/shared/workloads);
#   WL_DIR: a directory prepared by the kit's prepare.sh (default ~/.cache/lucce-workloads;
#           `scripts/workloads.sh` prepares one).
WL_KIT=${WL_KIT:-$REPO/../shared/workloads}
[[ -x $WL_KIT/run.sh ]] || WL_KIT=/work/shared/workloads
[[ -x $WL_KIT/run.sh ]] || { echo "workload kit not found (set WL_KIT)" >&2; exit 2; }
WL_DIR=${WL_DIR:-$HOME/.cache/lucce-workloads}

# warn_unless_tmpfs DIR: ext4 without a journal (this VM's disk) charges a run that creates
# thousands of files soon after the previous run deleted them (ant, javac) seconds of system
# time (the kernel skips recently deleted inodes), which falls on whichever run comes second, so
# runs are timed on a tmpfs; says so on stderr when DIR is not on one.
warn_unless_tmpfs() {
  [[ $(stat -f -c %T "$1" 2>/dev/null) == tmpfs ]] ||
    echo "note: WL_DIR=$1 is not on a tmpfs: ant's and javac's times may include seconds of file-system work (WL_DIR=/dev/shm/lucce-workloads avoids it; see README, Performance, for lucene_search's index there)" >&2
}

# read_libs LIB[+OPTS][,LIB[+OPTS]...]: sets the array `libs` to the agent libraries' absolute
# paths (exit 2 if one is missing) and `lib_opts` to the agent options given after a `+` (`;` for
# `,` inside them, e.g. `liblucce_agent.so+cache=/tmp/c`), and prints them as lib1, lib2, ...,
# the names the scripts' tables use. The same library may come twice with other options.
read_libs() {
  local given l
  IFS=, read -ra given <<<"$1"
  libs=()
  lib_opts=()
  for l in "${given[@]}"; do
    libs+=("$(realpath -e "${l%%+*}")") || exit 2
    if [[ $l == *+* ]]; then lib_opts+=(",${l#*+}"); else lib_opts+=(""); fi
    lib_opts[-1]=${lib_opts[-1]//;/,}
    echo "lib${#libs[@]} = ${libs[-1]}${lib_opts[-1]:+ (options${lib_opts[-1]/,/ })}"
  done
}
