#!/bin/sh
# make test's phases, each run whole whatever the one before it did, and one summary at the end.
#
#   Tests/phase.sh run NAME XML PHASES -- CMD [ARG]...
#       runs CMD (a test run writing its own results to XML, --xunit-output), says the runner's own
#       count, and appends NAME's line to PHASES; exits 0, so that make runs the next phase.
#   Tests/phase.sh summary PHASES
#       prints every phase's line and exits 1 if any phase failed or wrote no results.
#
# A run counts only when the runner said how it ended: swift test relays the runner's output and
# has lost its last lines (the summary among them) with status 0, and a runner that dies leaves no
# results; so a run without XML is a failed phase, said so.
set -u
case "${1-}" in
run)
    name=$2 xml=$3 phases=$4
    shift 4
    [ "${1-}" = -- ] && shift
    rm -f "$xml"
    "$@"
    rc=$?
    if [ ! -s "$xml" ]; then
        echo "make test: the test runner ended without writing its results ($xml): the tests after the last one shown never ran" >&2
        echo "FAILED $name: no results (the runner exited $rc)" >> "$phases"
        exit 0
    fi
    counts=$(grep -o 'tests="[0-9]*" failures="[0-9]*"' "$xml" | head -n 1)
    skipped=$(grep -o 'skipped="[0-9]*"' "$xml" | head -n 1)
    echo "make test: the runner's own count: $counts"
    if [ "$rc" -eq 0 ]; then state=ok; else state=FAILED; fi
    echo "$state $name: $counts${skipped:+ $skipped}${rc:+, exit $rc}" >> "$phases"
    ;;
summary)
    phases=$2
    echo "make test: the phases"
    sed 's/^/  /' "$phases"
    if grep -q '^FAILED ' "$phases"; then
        echo "make test: $(grep -c '^FAILED ' "$phases") of $(wc -l < "$phases") phases failed" >&2
        exit 1
    fi
    ;;
*)
    echo "usage: $0 run NAME XML PHASES -- CMD... | summary PHASES" >&2
    exit 64
    ;;
esac
