# Sourced by the scripts that run our Java programs (integration-tests/java/apps/streams): builds the module when
# its pom or a source is newer than the last build, under a lock, so that scripts the test suite runs at the same
# time never load classes another one is rewriting.
#
#   build_streams_app APP_DIR LOG_FILE   -> 0, or non-zero with Maven's output in LOG_FILE
build_streams_app() {
  local app=$1 log=$2 cp_file=$1/target/classpath.txt
  mkdir -p "$app/target"
  (
    flock 9
    if [ ! -s "$cp_file" ] || [ -n "$(find "$app/pom.xml" "$app/src" -newer "$cp_file" -print -quit)" ]; then
      mvn -q -B -f "$app/pom.xml" compile dependency:build-classpath -Dmdep.outputFile="$cp_file" > "$log" 2>&1 \
        || exit 1
      touch "$cp_file"
    fi
  ) 9> "$app/target/.build.lock"
}
