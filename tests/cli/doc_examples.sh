# Every command example in README.md and docs/ still parses, and every relative link there
# resolves (tests/cli/doc_examples.py says how).
exec python3 "$(dirname "$0")/doc_examples.py" "$1" "$2"
