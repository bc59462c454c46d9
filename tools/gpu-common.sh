# Shared by the GPU scripts (sourced after setting $root, the checkout).
#   gpu_setup OUT_NAME [SHAPES]  sets bin (the tools), out ($OUT, default $root/OUT_NAME, made) and
#                                shapes (the suite given, or shared/bench/llm-shapes.txt in or
#                                beside the checkout); fails with a message when there is none
#   pick SHAPES LINES [numbered] the lines of a shapes file, comments dropped, e.g. LINES "1-3,7"
#                                (all: every one); "numbered": each after its number in the suite
gpu_setup() {
  bin="${BUILD_DIR:-$root/build}/bin"
  out="${OUT:-$root/$1}"
  mkdir -p "$out"
  shapes="${2:-}"
  if [ -z "$shapes" ]; then
    for candidate in "$root/shared/bench/llm-shapes.txt" "$root/../shared/bench/llm-shapes.txt"; do
      [ -f "$candidate" ] && shapes="$candidate" && break
    done
  fi
  [ -f "$shapes" ] && return 0
  echo "no shapes file: pass one (M N K dtype layout per line)" >&2
  return 1
}

pick() {
  grep -v '^\s*#' "$1" | grep -v '^\s*$' | python3 -c "
import sys
rows, spec = sys.stdin.read().splitlines(), sys.argv[1]
want = set(range(1, len(rows) + 1)) if spec == 'all' else set()
if spec != 'all':
    for part in spec.split(','):
        a, _, b = part.partition('-')
        want.update(range(int(a), int(b or a) + 1))
number = len(sys.argv) > 2
print('\n'.join((f'{i} ' if number else '') + r for i, r in enumerate(rows, 1) if i in want))" "$2" ${3:+"$3"}
}
