# The end-to-end tests of ddptrain share the helpers of tests/cli: script.sh DDPTRAIN SOURCE_DIR SHARED_DATA_DIR.
source "$(dirname "${BASH_SOURCE[0]}")/../cli/lib.sh"
DDPTRAIN=$DDPSIM
