#!/bin/sh
# The release's activation check: a real service would restart here and answer a health check.
if grep -q broken VERSION; then
  echo "health check failed: $(cat VERSION)" >&2
  exit 1
fi
echo "hello $(cat VERSION) is live in $MANENT_ENVIRONMENT"
