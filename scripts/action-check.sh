#!/usr/bin/env bash
# The run step of action.yml: `eagle-convert check` with the action's inputs, read from INPUT_* variables.
#
#   INPUT_DRAFT (required)  draft folder or hub repo org/name[@rev]
#   INPUT_TARGET            target folder or hub repo
#   INPUT_BASELINE          the draft in production (--baseline)
#   INPUT_POLICY            policy file (default: eagle-check.toml in the working directory, if any)
#   INPUT_EXTRA             further arguments, split on whitespace (e.g. "--keep-going")
#   INPUT_JUNIT             JUnit XML path (default eagle-check.xml)
#   INPUT_SUMMARY           Markdown summary path (default eagle-check.md); it is also appended to
#                           $GITHUB_STEP_SUMMARY when that is set
#   EAGLE_CONVERT           the command to run (default eagle-convert)
#
# Writes junit=, summary=, exit-code= and passed= to $GITHUB_OUTPUT (when set) and exits with check's
# status: 0 pass, 1 fail (a check failed, or a stage the policy asks for could not run here), 2 usage.
set -uo pipefail

if [[ -z "${INPUT_DRAFT:-}" ]]; then
  echo "::error::eagle-convert check: the 'draft' input is required" >&2
  exit 2
fi
junit="${INPUT_JUNIT:-eagle-check.xml}"
summary="${INPUT_SUMMARY:-eagle-check.md}"
args=(check "$INPUT_DRAFT" --junit "$junit" --summary "$summary")
[[ -n "${INPUT_TARGET:-}" ]] && args+=(--target "$INPUT_TARGET")
[[ -n "${INPUT_BASELINE:-}" ]] && args+=(--baseline "$INPUT_BASELINE")
[[ -n "${INPUT_POLICY:-}" ]] && args+=(--policy "$INPUT_POLICY")
if [[ -n "${INPUT_EXTRA:-}" ]]; then
  read -r -a extra <<< "$INPUT_EXTRA"
  args+=("${extra[@]}")
fi

read -r -a cmd <<< "${EAGLE_CONVERT:-eagle-convert}"
echo "+ ${cmd[*]} ${args[*]}" >&2
"${cmd[@]}" "${args[@]}"
code=$?

if [[ -n "${GITHUB_OUTPUT:-}" ]]; then
  {
    echo "junit=$junit"
    echo "summary=$summary"
    echo "exit-code=$code"
    echo "passed=$([[ $code -eq 0 ]] && echo true || echo false)"
  } >> "$GITHUB_OUTPUT"
fi
case $code in
  0) ;;
  1) echo "::error::eagle-convert check failed: see $summary and the job summary" >&2 ;;
  *) echo "::error::eagle-convert check could not run (exit $code): usage (the policy file or a flag)" >&2 ;;
esac
exit $code
