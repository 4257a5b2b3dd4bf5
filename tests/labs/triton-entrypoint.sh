#!/bin/sh
# As NGC's entrypoint: runs the command it is given (by default tritonserver).
set -e
if [ "$#" -eq 0 ]; then
    set -- tritonserver --model-repository=/models
fi
exec "$@"
