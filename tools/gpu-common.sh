# Shared by the GPU scripts (sourced): the suite file, given or found in or beside the checkout.
#   find_shapes ROOT [GIVEN]  prints the path, or fails with a message
find_shapes() {
  local root="$1" given="${2:-}"
  if [ -n "$given" ]; then
    [ -f "$given" ] && echo "$given" && return 0
  else
    for candidate in "$root/shared/bench/llm-shapes.txt" "$root/../shared/bench/llm-shapes.txt"; do
      [ -f "$candidate" ] && echo "$candidate" && return 0
    done
  fi
  echo "no shapes file: pass one (M N K dtype layout per line)" >&2
  return 1
}
